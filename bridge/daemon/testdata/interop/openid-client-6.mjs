// openid-client 6 configured from the hub's RFC 8414 metadata alone
// (discovery() with algorithm 'oauth2'), then the code flow with PKCE and
// state, which also checks the iss of the authorization response; then
// discovery, a refresh and a revocation. The Go test plays the user: this
// script prints AUTH_URL <url>, reads the callback URL from stdin, and ends
// with RESULT <json>.
import * as client from 'openid-client';
import * as readline from 'node:readline';

const hub = new URL(process.env.HUB);
const redirect = process.env.REDIRECT;

const config = await client.discovery(hub, process.env.CLIENT_ID, process.env.CLIENT_SECRET, undefined, {
  algorithm: 'oauth2',
  execute: [client.allowInsecureRequests], // the test hub speaks plain HTTP on loopback
});
const verifier = client.randomPKCECodeVerifier();
const state = client.randomState();
const authURL = client.buildAuthorizationUrl(config, {
  redirect_uri: redirect,
  scope: 'app',
  code_challenge: await client.calculatePKCECodeChallenge(verifier),
  code_challenge_method: 'S256',
  state,
});
console.log('AUTH_URL ' + authURL.href);
const rl = readline.createInterface({ input: process.stdin });
const callback = await new Promise((resolve) => rl.once('line', resolve));
rl.close();

const tokens = await client.authorizationCodeGrant(config, new URL(callback), {
  pkceCodeVerifier: verifier,
  expectedState: state,
});
const get = async (url, token) => {
  const resp = await client.fetchProtectedResource(config, token, new URL(url), 'GET');
  return { status: resp.status, body: resp.status === 200 ? await resp.json() : null };
};
const endpoints = await get(new URL('/api/apps/endpoints', hub), tokens.access_token);
const uri = endpoints.body[0].uri;
const switches = await get(uri + '/switches', tokens.access_token);
const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token);
const afterRefresh = await get(uri + '/switches', refreshed.access_token);
await client.tokenRevocation(config, refreshed.refresh_token, { token_type_hint: 'refresh_token' });
let revokedStatus = 0;
try {
  revokedStatus = (await get(uri + '/switches', refreshed.access_token)).status;
} catch (e) {
  revokedStatus = e?.response?.status ?? (String(e).includes('401') ? 401 : -1);
}
console.log('RESULT ' + JSON.stringify({
  issuer: config.serverMetadata().issuer,
  uri,
  switches: switches.body,
  refreshed: refreshed.access_token !== tokens.access_token && !!refreshed.refresh_token,
  afterRefresh: afterRefresh.body,
  revokedStatus,
}));
