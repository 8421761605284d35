// A real OpenID Provider (oidc-provider) where people sign in, which is
// also the authorization server of an MCP server that acts per person, for
// tests/tests/delegation.rs. Usage:
//   node delegating_as.mjs NPM_DIR PORT SMS_ISSUER CLIENT_SECRET
//
// People sign in as in oidc_people.mjs (client "spear-people", ID tokens
// for that audience). SMS is client "spear-sms" (client_secret_basic) and
// may use two grants oidc-provider lets an application register:
// - token exchange (RFC 8693): a person's ID token from this provider as
//   subject_token, a workload JWT of SMS_ISSUER (fetched from its
//   discovery document and keys) addressed to this issuer as actor_token;
//   issued to people who connected their account (alice, bob; not carol),
//   with sub = the person, act = { sub: the node };
// - JWT bearer (RFC 7523): SMS's workload JWT alone; sub = the node.
// Access tokens are ES256 JWTs for the resource asked, verified by the MCP
// server through RFC 7662 introspection at /introspect, which says
// inactive once the person's grant is revoked (POST /admin/revoke?sub=S).
// Prints "READY <issuer>", then "EXCHANGE <sub> <actor>", "BEARER <sub>"
// and "REFUSED <why>" per token request.
import http from 'node:http';

const [npmDir, port, smsIssuer, clientSecret] = process.argv.slice(2);
const { default: Provider } = await import(`${npmDir}/node_modules/oidc-provider/lib/index.js`);
const jose = await import(`${npmDir}/node_modules/jose/dist/webapi/index.js`);

const issuer = `http://127.0.0.1:${port}`;
const connected = new Set(['alice', 'bob']);
const revoked = new Set();
const { privateKey, publicKey } = await jose.generateKeyPair('ES256');

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'spear-people',
      token_endpoint_auth_method: 'none',
      application_type: 'native',
      redirect_uris: ['http://127.0.0.1:1/cb'],
      grant_types: ['authorization_code'],
      response_types: ['code'],
    },
    {
      client_id: 'spear-sms',
      client_secret: clientSecret,
      grant_types: [
        'urn:ietf:params:oauth:grant-type:token-exchange',
        'urn:ietf:params:oauth:grant-type:jwt-bearer',
      ],
      response_types: [],
      redirect_uris: [],
    },
  ],
  scopes: ['openid', 'groups', 'notes:read'],
  claims: { openid: ['sub'], groups: ['groups'] },
  conformIdTokenClaims: false,
  findAccount: async (ctx, id) => ({ accountId: id, claims: async () => ({ sub: id, groups: [] }) }),
  features: { devInteractions: { enabled: true }, resourceIndicators: { enabled: false } },
  pkce: { required: () => true },
  ttl: { IdToken: 3600, AuthorizationCode: 60, Grant: 3600, Session: 3600, Interaction: 600 },
});

const ownKeys = jose.createRemoteJWKSet(new URL(`${issuer}/jwks`));
let smsKeys;
async function actor(jwt) {
  if (!smsKeys) {
    const discovery = await (await fetch(`${smsIssuer}/.well-known/openid-configuration`)).json();
    smsKeys = jose.createRemoteJWKSet(new URL(discovery.jwks_uri));
  }
  const { payload } = await jose.jwtVerify(jwt, smsKeys, { issuer: smsIssuer, audience: issuer });
  if (!String(payload.sub).startsWith('spiffe://')) throw new Error('the actor is not a workload');
  return payload.sub;
}

function refuse(ctx, description) {
  console.log(`REFUSED ${description}`);
  ctx.status = 400;
  ctx.body = { error: 'invalid_grant', error_description: description };
}

async function issue(ctx, claims) {
  const token = await new jose.SignJWT({ ...claims, scope: 'notes:read', client_id: 'spear-sms' })
    .setProtectedHeader({ alg: 'ES256', kid: 'as' })
    .setIssuer(issuer).setAudience(ctx.oidc.params.resource || 'unspecified')
    .setIssuedAt().setExpirationTime('300s').setJti(crypto.randomUUID())
    .sign(privateKey);
  ctx.body = {
    access_token: token, token_type: 'Bearer', expires_in: 300,
    issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
  };
}

provider.registerGrantType('urn:ietf:params:oauth:grant-type:token-exchange', async (ctx) => {
  const p = ctx.oidc.params;
  let person, node;
  try {
    if (p.subject_token_type !== 'urn:ietf:params:oauth:token-type:id_token') throw new Error(`subject_token_type ${p.subject_token_type}`);
    ({ payload: person } = await jose.jwtVerify(p.subject_token, ownKeys, { issuer, audience: 'spear-people' }));
    if (p.actor_token_type !== 'urn:ietf:params:oauth:token-type:jwt') throw new Error('no actor');
    node = await actor(p.actor_token);
  } catch (e) {
    return refuse(ctx, `the tokens do not verify: ${e.message}`);
  }
  if (!connected.has(person.sub)) return refuse(ctx, `${person.sub} has not connected their account`);
  console.log(`EXCHANGE ${person.sub} ${node}`);
  await issue(ctx, { sub: person.sub, act: { sub: node } });
}, ['subject_token', 'subject_token_type', 'actor_token', 'actor_token_type', 'resource', 'requested_token_type', 'scope']);

provider.registerGrantType('urn:ietf:params:oauth:grant-type:jwt-bearer', async (ctx) => {
  let node;
  try {
    node = await actor(ctx.oidc.params.assertion);
  } catch (e) {
    return refuse(ctx, `the workload JWT does not verify: ${e.message}`);
  }
  console.log(`BEARER ${node}`);
  await issue(ctx, { sub: node });
}, ['assertion', 'resource', 'scope']);

async function introspect(req, res) {
  let body = '';
  for await (const chunk of req) body += chunk;
  const token = new URLSearchParams(body).get('token') || '';
  let answer = { active: false };
  try {
    const { payload } = await jose.jwtVerify(token, publicKey, { issuer });
    if (!revoked.has(payload.sub)) answer = { active: true, ...payload };
  } catch { /* inactive */ }
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify(answer));
}

const callback = provider.callback();
http.createServer((req, res) => {
  const url = new URL(req.url, issuer);
  if (req.method === 'POST' && url.pathname === '/introspect') return void introspect(req, res);
  if (req.method === 'POST' && url.pathname === '/admin/revoke') {
    const sub = url.searchParams.get('sub');
    revoked.add(sub);
    connected.delete(sub);
    console.log(`REVOKE ${sub}`);
    return void res.end('revoked\n');
  }
  callback(req, res);
}).listen(Number(port), '127.0.0.1', () => console.log(`READY ${issuer}`));
