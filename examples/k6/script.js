// k6 reading hotshard's keys: the team keeps its k6 test and changes only the key source.
//
//   hotshard generate examples/incident.profile.json --messages 1e6 --seed 1 \
//       --format k6 -o examples/k6/keys.json
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e RATE=500 -e DURATION=60s examples/k6/script.js
//
// keys.json is one JSON array of key strings, in the order hotshard generated them. Iteration
// i of the test reads key i (wrapping around at the end), so the keys go out in that order
// whichever VU runs them, and the hot keys are as hot as the profile says.
//
// The constant-arrival-rate executor starts RATE iterations per second whether or not earlier
// requests returned (an open model): a slow shard shows up as latency, not as fewer requests
// sent (coordinated omission). A test short of VUs drops iterations; k6 counts them in
// dropped_iterations, so raise MAX_VUS when that count is not zero.

import http from 'k6/http';
import { check } from 'k6';
import { SharedArray } from 'k6/data';
import exec from 'k6/execution';

const BASE_URL = __ENV.BASE_URL || 'http://127.0.0.1:8080';
const LIMIT = __ENV.LIMIT || '50';

// Loaded once and shared by every VU. A relative path is resolved from this script's folder.
const keys = new SharedArray('hotshard keys', function () {
  return JSON.parse(open(__ENV.KEYS || './keys.json'));
});

export const options = {
  scenarios: {
    hotshard_keys: {
      executor: 'constant-arrival-rate',
      rate: Number(__ENV.RATE || 100),
      timeUnit: '1s',
      duration: __ENV.DURATION || '30s',
      preAllocatedVUs: Number(__ENV.VUS || 20),
      maxVUs: Number(__ENV.MAX_VUS || 200),
    },
  },
};

export default function () {
  const key = keys[exec.scenario.iterationInTest % keys.length];
  const res = http.get(
    `${BASE_URL}/channels/${encodeURIComponent(key)}/messages?limit=${LIMIT}`,
    // one metric series for all keys, not one per key
    { tags: { name: 'GET /channels/{channel}/messages' } },
  );
  check(res, { 'status is 200': (r) => r.status === 200 });
}
