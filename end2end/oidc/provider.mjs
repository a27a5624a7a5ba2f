// A real OpenID provider (oidc-provider) for runcell's tests, on loopback only.
//
//   node end2end/oidc/provider.mjs [--port N] --client ID:SECRET:REDIRECT_URI ...
//
// Listens on 127.0.0.1 (port N, default 0: any free port) with the issuer
// http://127.0.0.1:<port>. Each --client is a confidential web client (its
// secret sent as client_secret_basic or client_secret_post) for the
// authorization code flow, which must use PKCE with S256. ID tokens are
// signed RS256 with a key made at start, so nothing outlives the process.
//
// Signing in is oidc-provider's own development login page (devInteractions):
// any login name and any password are accepted; the account has
// sub = <login>, email = <login>@example.test (verified) and name = <Login>.
// A login with an '@' in it, `<who>+<address>`, is someone who typed an
// address at a provider that does not check addresses: sub = <login>,
// email = <address>, with email_verified false.
// The requested scopes (openid email profile) are granted without a consent
// page, so the login form is the only interaction.
//
// Contract with the test that starts it: once listening it writes exactly one
// line to stdout, {"issuer":"http://127.0.0.1:PORT"}, and nothing after it
// (every log goes to stderr). It exits when its stdin closes (so a test
// that dies does not leave it behind) and on SIGTERM.

import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

// stdout carries the one line above: oidc-provider's notices (console.info)
// and anything else a library logs go to stderr.
console.log = console.error;
console.info = console.error;
console.debug = console.error;

const { default: Provider } = await import('oidc-provider');

function usage(message) {
  console.error(`provider.mjs: ${message}`);
  console.error('usage: node provider.mjs [--port N] --client ID:SECRET:REDIRECT_URI ...');
  process.exit(2);
}

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    client: { type: 'string', multiple: true, default: [] },
  },
});

const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) usage(`bad --port ${values.port}`);

// ID and secret end at the first two colons; the redirect URI (which has
// colons of its own) is the rest.
const clients = values.client.map((spec) => {
  const first = spec.indexOf(':');
  const second = spec.indexOf(':', first + 1);
  if (first < 1 || second < 0 || second === spec.length - 1) usage(`bad --client ${spec}`);
  return {
    client_id: spec.slice(0, first),
    client_secret: spec.slice(first + 1, second),
    redirect_uris: [spec.slice(second + 1)],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    // oidc-provider takes the secret in the body (client_secret_post) from a
    // client registered for the header too, as long as both are enabled below.
    token_endpoint_auth_method: 'client_secret_basic',
  };
});
if (clients.length === 0) usage('no --client given');

// The signing key, made now: a private JWK for oidc-provider's jwks.
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = {
  ...privateKey.export({ format: 'jwk' }),
  kid: randomUUID(),
  alg: 'RS256',
  use: 'sig',
};

const capitalised = (login) => login.charAt(0).toUpperCase() + login.slice(1);

const server = createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(port, '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients,
  clientAuthMethods: ['client_secret_basic', 'client_secret_post'],
  responseTypes: ['code'],
  pkce: { required: () => true },
  jwks: { keys: [signingKey] },
  enabledJWA: { idTokenSigningAlgValues: ['RS256'] },
  scopes: ['openid', 'email', 'profile'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name'],
  },
  // The ID token carries the scopes' claims (email, name), not only sub:
  // what a relying party that reads no userinfo needs.
  conformIdTokenClaims: false,
  // Seconds; set so oidc-provider does not remark on its defaults. A code
  // is good for a minute and once.
  ttl: {
    AuthorizationCode: 60,
    Interaction: 600,
    Session: 3600,
    Grant: 3600,
    AccessToken: 600,
    IdToken: 600,
  },
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  features: {
    devInteractions: { enabled: true },
  },
  async findAccount(_ctx, sub) {
    return {
      accountId: sub,
      async claims() {
        const typed = sub.includes('@');
        return {
          sub,
          email: typed ? sub.slice(sub.indexOf('+') + 1) : `${sub}@example.test`,
          email_verified: !typed,
          name: capitalised(sub),
        };
      },
    };
  },
  // No consent page: a signed-in person grants the client every scope it
  // asks for (of those above).
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId
      || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope([...ctx.oidc.requestParamOIDCScopes].join(' '));
    await grant.save();
    return grant;
  },
});

for (const event of ['server_error', 'authorization.error', 'grant.error', 'userinfo.error']) {
  provider.on(event, (_ctx, error) => {
    console.error(`provider.mjs: ${event}: ${error.message}${error.error_description ? ` (${error.error_description})` : ''}`);
  });
}

// A browser asks every page's server for an icon: none, and no 404 for a
// test to read as a failure.
const callback = provider.callback();
server.on('request', (req, res) => {
  if (req.url === '/favicon.ico') {
    res.writeHead(204).end();
    return;
  }
  callback(req, res);
});

const stop = () => {
  server.close();
  server.closeAllConnections();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.on('close', stop);
process.stdin.on('error', stop);
process.stdin.resume();

process.stdout.write(`${JSON.stringify({ issuer })}\n`);
