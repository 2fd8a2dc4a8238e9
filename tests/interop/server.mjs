// A real OAuth 2.0 authorization server for lanyard's interoperability test
// (tests/it/interop_oidc_provider.rs): node's oidc-provider, on loopback, with
// one client that authenticates with private_key_jwt (RFC 7523) and may use
// only the client_credentials grant.
//
// Environment:
//   CLIENT_ID            the registered client's client_id
//   PUBLIC_KEY_PEM_FILE  the client's public key (SPKI PEM); its JWK is registered
//
// stdout carries only JSON lines, for the test to read:
//   {"issuer":"http://127.0.0.1:PORT","token_endpoint":"http://127.0.0.1:PORT/token"}
//     once, when listening;
//   {"issued":"<access token>"}
//     for every client_credentials access token issued.
// Everything else goes to stderr. The server exits when stdin closes, so the
// test closing its end (or dying) never leaves it running.

import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';

// oidc-provider prints notices with console.info (stdout). stdout is the
// protocol channel, so every console method goes to stderr and the protocol
// lines are written with process.stdout.write below. This must happen before
// oidc-provider is loaded (hence the dynamic import).
for (const method of ['log', 'info', 'debug']) {
  console[method] = (...args) => console.error(...args);
}
const { default: Provider, errors } = await import('oidc-provider');

function emit(object) {
  process.stdout.write(`${JSON.stringify(object)}\n`);
}

function fail(message) {
  console.error(`interop server: ${message}`);
  process.exit(1);
}

// Exit when stdin closes, however it closes.
process.stdin.on('end', () => process.exit(0));
process.stdin.on('close', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();

const clientId = process.env.CLIENT_ID;
const publicKeyFile = process.env.PUBLIC_KEY_PEM_FILE;
if (!clientId) fail('CLIENT_ID is not set');
if (!publicKeyFile) fail('PUBLIC_KEY_PEM_FILE is not set');

let clientJwk;
try {
  clientJwk = createPublicKey(readFileSync(publicKeyFile)).export({ format: 'jwk' });
} catch (err) {
  fail(`cannot read the public key from ${publicKeyFile}: ${err.message}`);
}

// The provider's own signing key (it signs nothing in this test, but without
// one it falls back to its published development keys and warns).
const { privateKey: providerKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const providerJwk = { ...providerKey.export({ format: 'jwk' }), use: 'sig', alg: 'RS256' };

// Listen first: the issuer URL needs the port the OS picked.
const server = createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(0, '127.0.0.1', resolve);
});
const { port } = server.address();
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: clientId,
      token_endpoint_auth_method: 'private_key_jwt',
      token_endpoint_auth_signing_alg: 'RS256',
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      jwks: { keys: [clientJwk] },
    },
  ],
  jwks: { keys: [providerJwk] },
  ttl: { ClientCredentials: 600 },
  features: {
    clientCredentials: { enabled: true },
    devInteractions: { enabled: false },
  },
  // oidc-provider accepts the issuer, the token endpoint URL or the URL of
  // the endpoint being called as the assertion's `aud`. Accepting only the
  // issuer makes the test prove that lanyard signs with SA_IAM_AUDIENCE
  // (set to the issuer) rather than with SA_TOKEN_URI.
  async assertJwtClientAuthClaimsAndHeader(ctx, claims) {
    if (claims.aud !== ctx.oidc.issuer) {
      throw new errors.InvalidClientAuth('audience (aud) must equal the issuer identifier');
    }
  },
  // Nothing in this configuration needs an outbound request (the client's
  // keys are inline); refuse any, so the test cannot reach the network.
  fetch() {
    throw new Error('outbound requests are disabled in the interop test server');
  },
});

// Opaque access tokens (the default format) are stored, and `saved` is
// emitted with the model, whose `jti` is the token value handed out.
provider.on('client_credentials.saved', (token) => emit({ issued: token.jti }));
// A token format that is not stored would emit `issued` instead; its value
// is not on the model, so make that failure loud rather than silent.
provider.on('client_credentials.issued', () => {
  console.error('interop server: client_credentials.issued: token format is not opaque');
});
provider.on('grant.error', (ctx, err) => {
  const detail = [err.error_description, err.error_detail].filter(Boolean).join(': ');
  console.error(`interop server: grant.error: ${err.message}${detail ? `: ${detail}` : ''}`);
});
provider.on('server_error', (ctx, err) => {
  console.error('interop server: server_error:', err);
});

server.on('request', provider.callback());

// Ask the provider where its token endpoint is rather than assuming a path.
const discovery = await (await fetch(`${issuer}/.well-known/openid-configuration`)).json();
if (discovery.issuer !== issuer || typeof discovery.token_endpoint !== 'string') {
  fail(`unexpected discovery document: ${JSON.stringify(discovery)}`);
}
emit({ issuer, token_endpoint: discovery.token_endpoint });
