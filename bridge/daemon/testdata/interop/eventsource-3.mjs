// A real SSE client, the npm eventsource package (3.x, the WHATWG
// EventSource for Node), reads an installation's event stream with its
// bearer token sent in a header by the fetch the library lets a client
// give it. It prints READY once it has the snapshot; the Go test then
// switches; it ends with RESULT <json>: every event it was handed, with the
// id the library keeps for reconnecting.
import { EventSource } from 'eventsource';

const want = Number(process.env.WANT);
const es = new EventSource(process.env.STREAM, {
  fetch: (input, init) =>
    fetch(input, { ...init, headers: { ...init.headers, Authorization: 'Bearer ' + process.env.TOKEN } }),
});
const got = [];
function take(e) {
  got.push({ type: e.type, lastEventId: e.lastEventId, data: JSON.parse(e.data) });
}
es.addEventListener('snapshot', (e) => {
  take(e);
  console.log('READY');
});
es.addEventListener('switch', (e) => {
  take(e);
  if (got.length === want) {
    es.close();
    console.log('RESULT ' + JSON.stringify(got));
    process.exit(0);
  }
});
es.onerror = (e) => console.error('eventsource error', e.message, e.code);
setTimeout(() => {
  console.error('timed out with ' + JSON.stringify(got));
  process.exit(1);
}, 60000);
