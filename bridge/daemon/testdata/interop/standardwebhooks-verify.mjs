// Verifies webhook deliveries with the Standard Webhooks reference library
// (npm standardwebhooks), not the hub's code: each stdin line is
// {"secret", "headers", "body"}; each output line is OK or FAIL <reason>.
import { Webhook } from 'standardwebhooks';
import readline from 'node:readline';

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  const { secret, headers, body } = JSON.parse(line);
  try {
    new Webhook(secret).verify(body, headers);
    console.log('OK');
  } catch (e) {
    console.log('FAIL ' + (e && e.message ? e.message : e));
  }
}
