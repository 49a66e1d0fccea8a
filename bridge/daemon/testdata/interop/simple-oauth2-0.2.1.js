// The original platform's published example client, reduced to its calls:
// simple-oauth2 0.2.1 (HTTP Basic and the client credentials in the form
// at once), scope=app, discovery at /api/smartapps/endpoints, and the
// record's url appended to the API root. Then a refresh and a revocation
// with the same library. The Go test plays the user: this script prints
// AUTH_URL <url>, reads the callback URL from stdin, and ends with
// RESULT <json>.
'use strict';
const readline = require('readline');

const hub = process.env.HUB;
const redirect = process.env.REDIRECT;
const oauth2 = require('simple-oauth2')({
  clientID: process.env.CLIENT_ID,
  clientSecret: process.env.CLIENT_SECRET,
  site: hub,
});

function call(method, path, token) {
  return new Promise((resolve, reject) => {
    oauth2.api(method, path, { access_token: token }, (err, body) => (err ? reject(new Error(JSON.stringify(err))) : resolve(body)));
  });
}

async function main() {
  const authURL = oauth2.authCode.authorizeURL({ redirect_uri: redirect, scope: 'app', state: 'st-0.2.1' });
  console.log('AUTH_URL ' + authURL);
  const rl = readline.createInterface({ input: process.stdin });
  const callback = await new Promise((resolve) => rl.once('line', resolve));
  rl.close();
  const code = new URL(callback).searchParams.get('code');

  const result = await new Promise((resolve, reject) => {
    oauth2.authCode.getToken({ code: code, redirect_uri: redirect }, (err, r) => (err ? reject(new Error(JSON.stringify(err))) : resolve(r)));
  });
  const token = oauth2.accessToken.create(result);
  const endpoints = await call('GET', '/api/smartapps/endpoints', token.token.access_token);
  const url = endpoints[0].url;
  const switches = await call('GET', url + '/switches', token.token.access_token);
  await call('PUT', url + '/switches/on', token.token.access_token);

  const refreshed = await new Promise((resolve, reject) => {
    token.refresh((err, t) => (err ? reject(new Error(JSON.stringify(err))) : resolve(t)));
  });
  const afterRefresh = await call('GET', url + '/switches', refreshed.token.access_token);
  await new Promise((resolve, reject) => {
    refreshed.revoke('refresh_token', (err) => (err ? reject(new Error(JSON.stringify(err))) : resolve()));
  });
  // The library hands an error answer's body over without its status, so
  // the status is read with a plain request: any other answer than a 401
  // fails the test. The library must refuse the token too.
  const res = await fetch(hub + url + '/switches', { headers: { Authorization: 'Bearer ' + refreshed.token.access_token } });
  const revokedStatus = res.status;
  let libraryError = '';
  try {
    await call('GET', url + '/switches', refreshed.token.access_token);
  } catch (e) {
    libraryError = (JSON.parse(e.message) || {}).error || 'unparsed';
  }
  console.log('RESULT ' + JSON.stringify({
    url: url,
    switches: switches,
    refreshed: refreshed.token.access_token !== result.access_token,
    afterRefresh: afterRefresh,
    revokedStatus: revokedStatus,
    libraryError: libraryError,
  }));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
