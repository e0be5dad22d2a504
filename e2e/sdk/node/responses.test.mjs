// llmedge's Responses API (/v1/responses) through the official openai npm
// package: one answer, a stream, and the refusal of what needs a response
// store. e2e/sdk_test.go runs it beside sdk.test.mjs, with the same
// environment (see there).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.LLMEDGE_OPENAI_BASE_URL;
if (!baseURL) {
  throw new Error('LLMEDGE_OPENAI_BASE_URL is not set: run through e2e/sdk_test.go');
}
const client = new OpenAI({ baseURL, apiKey: process.env.LLMEDGE_KEY, maxRetries: 0 });

let first;

test('responses: one answer', async () => {
  const r = await client.responses.create({
    model: 'qwen', instructions: 'Be terse.', input: 'Say hello.', max_output_tokens: 64,
  });
  assert.equal(r.object, 'response');
  assert.equal(r.model, 'qwen');
  assert.equal(r.status, 'completed');
  assert.ok(r.output_text.length > 0, 'output_text gathers the output');
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);
  first = r;
});

test('responses: stream', async () => {
  const stream = await client.responses.create({
    model: 'qwen', input: [{ role: 'user', content: [{ type: 'input_text', text: 'Say hello.' }] }], stream: true,
  });
  const types = [];
  let text = '';
  let done;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed') done = ev.response;
  }
  assert.equal(types[0], 'response.created');
  assert.equal(types.at(-1), 'response.completed');
  assert.ok(text.length > 0);
  assert.equal(done.model, 'qwen');
  assert.equal(done.output.map((o) => o.content.map((c) => c.text).join('')).join(''), text);
});

test('responses: previous_response_id is refused', async () => {
  await assert.rejects(
    client.responses.create({ model: 'qwen', input: 'And then?', previous_response_id: first?.id ?? 'resp_1' }),
    (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, `got ${err}`);
      assert.equal(err.param, 'previous_response_id');
      assert.equal(err.code, 'unsupported_parameter');
      return true;
    },
  );
});
