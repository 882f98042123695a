// A real OAuth 2.1 / OpenID Connect authorization server for the sign-in tests: npm `oidc-provider` 9.x on Node 22
// (installed by .ci/run under .ci/node). tests/authserver.py starts it with one JSON argument, the path of a file:
//
//   {"port": 0, "keys": {"keys": [private JWKs]}, "clients": [client metadata...],
//    "resources": {"http://127.0.0.1:PORT/mcp": {"scope": "explore score operate", "format": "jwt", "ttl": 600}}}
//
// It prints one line, {"ready": ISSUER}, once it listens, and exits when its stdin closes (so a killed test never
// leaves it behind). The person in front of the browser is simulated: an authorization request goes straight
// through sign-in and consent as the account named by `login_hint` (default "team-a"), granting what was asked for
// within what the resource allows, the way a user who clicks "Allow" would.
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.cwd(), 'package.json'));
const { default: Provider, errors } = await import(require.resolve('oidc-provider'));

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const resources = config.resources ?? {};

const server = http.createServer();
await new Promise((resolve) => server.listen(config.port ?? 0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: config.clients ?? [],
  jwks: config.keys,
  findAccount: async (ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
  // The resources' scopes too: a host registering itself (RFC 7591) registers the scope it will ask for, and
  // oidc-provider accepts in a registration only the scopes it lists here.
  scopes: [...new Set(['openid', 'offline_access', ...Object.values(resources).flatMap((r) => r.scope.split(' '))])],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (ctx, client, oneOf) => oneOf,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (ctx, indicator) => {
        const known = resources[indicator];
        if (!known) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
        return {
          scope: known.scope,
          accessTokenTTL: known.ttl ?? 600,
          accessTokenFormat: known.format ?? 'jwt',
          jwt: { sign: { alg: known.alg ?? 'ES256' } },
        };
      },
    },
  },
  // A refresh token whenever the client may use one (the "refreshed token keeps its budget" test).
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  pkce: { required: () => true },
  // Access tokens live as long as their resource says (its ttl above).
  ttl: { RefreshToken: 3600, Interaction: 600, Session: 3600, Grant: 3600 },
  clientDefaults: {
    grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], id_token_signed_response_alg: 'ES256',
  },
});
// Loopback HTTP issuers and redirects are what a test has; oidc-provider allows them for native-style clients.
provider.proxy = false;

async function signIn(req, res) {
  const details = await provider.interactionDetails(req, res);
  const accountId = details.params.login_hint || 'team-a';
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId, clientId: details.params.client_id });
  const asked = String(details.params.scope || '').split(' ').filter(Boolean);
  grant.addOIDCScope(asked.join(' ') || 'openid');
  const indicators = [].concat(details.params.resource || []);
  for (const indicator of indicators) {
    const allowed = new Set(String(resources[indicator]?.scope || '').split(' '));
    grant.addResourceScope(indicator, asked.filter((s) => allowed.has(s)).join(' '));
  }
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { login: { accountId }, consent: { grantId } }, {
    mergeWithLastSubmission: false,
  });
}

const callback = provider.callback();
server.on('request', (req, res) => {
  if (req.url.startsWith('/interaction/')) {
    signIn(req, res).catch((err) => {
      res.statusCode = 500;
      res.end(String(err));
    });
    return;
  }
  callback(req, res);
});

process.stdout.write(`${JSON.stringify({ ready: issuer })}\n`);
process.stdin.on('data', () => {});
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
