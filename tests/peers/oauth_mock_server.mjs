// A real authorization server from npm (oauth2-mock-server) for the OAuth
// tests (tests/tests/oauth.rs). Usage: node oauth_mock_server.mjs NPM_DIR.
// Prints "READY <issuer>" when it listens, then one line per event the
// tests check: "CODE <code>" for each authorization code it hands out and
// "GRANT <grant_type> <client_id>" for each token request.
const [npmDir] = process.argv.slice(2);
const { OAuth2Server } = await import(`${npmDir}/node_modules/oauth2-mock-server/dist/index.mjs`);

const server = new OAuth2Server();
await server.issuer.keys.generate('RS256');
// A confidential client authenticates with its secret, as the metadata says.
server.service.on('beforeWellKnownOpenIdConfiguration', (response) => {
  response.body.token_endpoint_auth_methods_supported = ['client_secret_basic', 'client_secret_post', 'none'];
});
// A code carries the scope the authorization asked for, as at any real
// authorization server (the mock would take it from the token request).
const scopeOfCode = new Map();
server.service.on('beforeAuthorizeRedirect', (redirect, req) => {
  const code = redirect.url.searchParams.get('code');
  const scope = new URL(req.url, 'http://x').searchParams.get('scope');
  if (scope) scopeOfCode.set(code, scope);
  console.log(`CODE ${code}`);
});
server.service.on('beforeTokenSigning', (token, req) => {
  const body = req.body || {};
  const basic = (req.headers.authorization || '').startsWith('Basic ')
    ? Buffer.from(req.headers.authorization.slice(6), 'base64').toString().split(':')[0]
    : undefined;
  token.payload.aud = body.resource || token.payload.aud;
  if (body.grant_type === 'authorization_code' && scopeOfCode.has(body.code)) {
    token.payload.scope = scopeOfCode.get(body.code);
  }
  console.log(`GRANT ${body.grant_type} ${body.client_id || basic || '-'}`);
});
await server.start(0, '127.0.0.1');
console.log(`READY ${server.issuer.url}`);
