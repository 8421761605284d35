// A real OpenID Provider from npm (oidc-provider, the certified
// implementation) for the cluster OAuth tests (tests/tests/oauth_cluster.rs).
// Usage: node oidc_provider.mjs NPM_DIR PORT RESOURCE REDIRECT_URI TTL_SECONDS M2M_SECRET
//
// It knows two clients: "spear-cli" (public, authorization code + PKCE,
// refresh tokens rotated on every use) and "spear-m2m" (client
// credentials). Access tokens for RESOURCE are JWTs (scope docs:read) that
// live TTL_SECONDS. It prints "READY <issuer>" when it listens, then one
// line per event the tests check: "GRANT <grant_type>" per token issued,
// "GRANT_ERROR <error>" per token request refused, "REFRESH <value>" per
// refresh token saved, "CONSUMED" per refresh token spent by rotation,
// "CODE <value>" per authorization code. POST /test/revoke destroys every
// refresh token it issued (an administrator revoking the grant).
const [npmDir, port, resource, redirectUri, ttl, m2mSecret] = process.argv.slice(2);
const { default: Provider, errors } = await import(`${npmDir}/node_modules/oidc-provider/lib/index.js`);
import http from 'node:http';

const issuer = `http://127.0.0.1:${port}`;
const issued = [];

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'spear-cli',
      token_endpoint_auth_method: 'none',
      // https back to loopback (a console under TLS) is a web client's
      // redirect for oidc-provider (RFC 8252 keeps native ones off it).
      application_type: redirectUri.startsWith('https:') ? 'web' : 'native',
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    },
    {
      client_id: 'spear-m2m',
      client_secret: m2mSecret,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
    },
  ],
  scopes: ['openid', 'offline_access', 'docs:read'],
  features: {
    devInteractions: { enabled: true },
    revocation: { enabled: true },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (indicator !== resource) throw new errors.InvalidTarget();
        return {
          scope: 'docs:read',
          audience: resource,
          accessTokenTTL: Number(ttl),
          accessTokenFormat: 'jwt',
        };
      },
    },
  },
  pkce: { required: () => true },
  // Every authorization-code client that may refresh gets a refresh
  // token, rotated on each use (the spec's rule for public clients).
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: () => true,
  ttl: { RefreshToken: 3600, Grant: 3600, Session: 3600, Interaction: 600, AuthorizationCode: 60 },
});

provider.on('grant.success', (ctx) => console.log(`GRANT ${ctx.oidc.params.grant_type}`));
provider.on('grant.error', (ctx, error) => console.log(`GRANT_ERROR ${error.error}`));
provider.on('refresh_token.saved', (token) => {
  issued.push(token);
  console.log(`REFRESH ${token.jti}`);
});
provider.on('refresh_token.consumed', () => console.log('CONSUMED'));
provider.on('authorization_code.saved', (code) => console.log(`CODE ${code.jti}`));

const callback = provider.callback();
const server = http.createServer((req, res) => {
  if (req.method === 'POST' && req.url === '/test/revoke') {
    Promise.all(issued.map((token) => token.destroy())).then(() => {
      console.log(`REVOKED ${issued.length}`);
      res.end('revoked\n');
    });
    return;
  }
  callback(req, res);
});
server.listen(Number(port), '127.0.0.1', () => console.log(`READY ${issuer}`));
