// A client generated from the hub's OpenAPI document, as a client
// developer makes one: openapi-typescript wrote ./openapi.d.ts from the
// hub's /api/openapi.json, and openapi-fetch calls the hub with those
// types, so a path, parameter or field this script uses that the document
// does not describe fails `tsc --strict` before the script runs.
//
// With the token in TOKEN it discovers the installation, lists its
// switches, turns the kitchen light on and reads it back, follows a 501
// (the doorbell chime has no off), a 429 of a switch's change cap (the
// hall lamp may change once an hour) and a 429 of the installation's rate
// limit, and prints RESULT <json> for the Go test to check.
import createClient from "openapi-fetch";
import type { components, paths } from "./openapi.js";

// The little of Node this script uses, declared here rather than with
// @types/node: one package less to pin.
declare const process: { env: Record<string, string | undefined> };

type ApiError = components["schemas"]["Error"];
type OAuthError = components["schemas"]["OAuthError"];

const hubURL = process.env.HUB;
const token = process.env.TOKEN;
if (!hubURL || !token) {
  throw new Error("HUB and TOKEN must be set");
}
const headers = { Authorization: `Bearer ${token}` };

// apiError is the installation API's error body, told apart from an
// OAuth error (which has no type) by its fields, as the document's anyOf
// leaves a client to do.
function apiError(e: ApiError | OAuthError | undefined): ApiError | null {
  return e !== undefined && "type" in e && e.type === "SmartAppException" ? e : null;
}

// errorFields is what the Go test checks of an error body.
function errorFields(e: ApiError | OAuthError | undefined) {
  const body = apiError(e);
  if (body === null) {
    return { other: e ?? null };
  }
  return {
    error: body.error,
    type: body.type,
    status: body.status,
    message: body.message,
    failures: (body.failures ?? []).map((f) => ({ id: f.id, name: f.name, reason: f.reason })),
  };
}

// rateHeaders are the rate-limit headers of an answer, as numbers (null
// when absent).
function rateHeaders(r: Response) {
  const num = (name: string) => {
    const v = r.headers.get(name);
    return v === null ? null : Number(v);
  };
  return {
    retryAfter: num("Retry-After"),
    limit: num("X-RateLimit-Limit"),
    remaining: num("X-RateLimit-Remaining"),
  };
}

// Discovery: where the token's installation lives.
const platform = createClient<paths>({ baseUrl: hubURL, headers });
const discovered = await platform.GET("/api/apps/endpoints");
if (discovered.data === undefined || discovered.data.length !== 1) {
  throw new Error(`discovery answered ${discovered.response.status}: ${JSON.stringify(discovered.error)}`);
}
const endpoint = discovered.data[0];
const installationId = endpoint.url.slice(endpoint.url.lastIndexOf("/") + 1);

// The installation's paths, at the hub discovery named.
const api = createClient<paths>({ baseUrl: endpoint.base_url, headers });
const path = { installationId };

const list = () => api.GET("/api/apps/installations/{installationId}/switches", { params: { path } });
const listed = await list();
if (listed.data === undefined) {
  throw new Error(`GET /switches answered ${listed.response.status}: ${JSON.stringify(listed.error)}`);
}

const read = async (switchId: string) => {
  const r = await api.GET("/api/apps/installations/{installationId}/switches/{switchId}", {
    params: { path: { installationId, switchId } },
  });
  return {
    status: r.response.status,
    value: r.data === undefined ? "absent" : r.data.value,
    available: r.data?.available ?? null,
    remaining: rateHeaders(r.response).remaining,
  };
};
const command = (switchId: string, command: "on" | "off") =>
  api.PUT("/api/apps/installations/{installationId}/switches/{switchId}/{command}", {
    params: { path: { installationId, switchId, command } },
  });

// One switch commanded, then read back.
const on = await command("kitchen", "on");
const kitchen = await read("kitchen");

// 501: the doorbell has no off; turned on, it stays on.
const doorbellOn = await command("doorbell", "on");
const doorbellBefore = await read("doorbell");
const off = await command("doorbell", "off");
const doorbellAfter = await read("doorbell");

// 429 of the hall lamp's change cap: the first change passes, the second
// is refused and names the lamp.
const hallOff = await command("hall", "off");
const hallOn = await command("hall", "on");
const hall = await read("hall");

// 429 of the installation's rate limit: list until refused, within a
// bound; the answer before the first list said how many were left.
let accepted = 0;
let refused: Awaited<ReturnType<typeof list>> | null = null;
for (let i = 0; i < 50 && refused === null; i++) {
  const r = await list();
  if (r.response.status === 200) {
    accepted++;
  } else {
    refused = r;
  }
}

console.log(
  "RESULT " +
    JSON.stringify({
      endpoint: { url: endpoint.url, base_url: endpoint.base_url, uri: endpoint.uri, location: endpoint.location.id, clientId: endpoint.oauthClient.clientId },
      listed: listed.data.map((s) => ({ id: s.id, name: s.name, value: s.value, available: s.available })),
      command: { status: on.response.status, requestId: on.response.headers.get("X-Request-Id"), readBack: kitchen },
      notImplemented: {
        first: doorbellOn.response.status,
        status: off.response.status,
        body: errorFields(off.error),
        before: doorbellBefore,
        after: doorbellAfter,
      },
      changeCap: {
        first: hallOff.response.status,
        status: hallOn.response.status,
        ...rateHeaders(hallOn.response),
        body: errorFields(hallOn.error),
        after: hall,
      },
      rateLimit: {
        remainingBefore: hall.remaining,
        accepted,
        status: refused?.response.status ?? null,
        ...(refused ? rateHeaders(refused.response) : {}),
        body: errorFields(refused?.error),
      },
    }),
);
