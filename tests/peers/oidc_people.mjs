// A real OpenID Provider (oidc-provider, the certified implementation) where
// people sign in, for the principal tests (tests/tests/principals.rs).
// Usage: node oidc_people.mjs NPM_DIR PORT [CONSOLE_CALLBACK]
//
// Its one client, "spear-people" (public, authorization code + PKCE),
// redirects to http://127.0.0.1:1/cb, which nobody serves: sign_in.py
// takes the code from the redirect itself; CONSOLE_CALLBACK, when given,
// is SMS's console's sign-in callback, a redirect URI as well. ID tokens carry `groups`
// (alice: eng; carol: ops; dave: 560 long group names, which make his ID
// token over 20 KiB, as large directories do; anyone else: none) and live an hour, or two
// seconds when the authorization request asks for scope "short".
// Prints "READY <issuer>" when it listens.
const [npmDir, port, consoleCallback] = process.argv.slice(2);
const { default: Provider } = await import(`${npmDir}/node_modules/oidc-provider/lib/index.js`);

const issuer = `http://127.0.0.1:${port}`;
const groups = {
  alice: ['eng'],
  carol: ['ops'],
  dave: ['ops', ...Array.from({ length: 560 }, (_, i) => `directory-group-number-${i}`)],
};

const provider = new Provider(issuer, {
  clients: [{
    client_id: 'spear-people',
    token_endpoint_auth_method: 'none',
    // oidc-provider lets a native client come back over https only to a
    // host that is not loopback (RFC 8252); a console under TLS on
    // loopback is a web client's redirect.
    application_type: consoleCallback?.startsWith('https:') ? 'web' : 'native',
    redirect_uris: ['http://127.0.0.1:1/cb', ...(consoleCallback ? [consoleCallback] : [])],
    grant_types: ['authorization_code'],
    response_types: ['code'],
  }],
  scopes: ['openid', 'groups', 'short'],
  claims: { openid: ['sub'], groups: ['groups'] },
  // The scopes' claims go in the ID token itself (SMS reads no userinfo).
  conformIdTokenClaims: false,
  findAccount: async (ctx, id) => ({
    accountId: id,
    claims: async () => ({ sub: id, groups: groups[id] || [] }),
  }),
  features: { devInteractions: { enabled: true } },
  pkce: { required: () => true },
  ttl: {
    IdToken: (ctx) => (ctx?.oidc?.entities?.AuthorizationCode?.scope?.split(' ').includes('short') ? 2 : 3600),
    AuthorizationCode: 60, Grant: 3600, Session: 3600, Interaction: 600,
  },
});
provider.listen(Number(port), () => console.log(`READY ${issuer}`));
