// llmedge's OpenAI-compatible API through the official openai npm package.
//
// e2e/sdk_test.go starts a real gateway (the fixture of e2e/openai_test.go:
// a model per outcome) and runs this file with node --test, passing:
//
//   LLMEDGE_OPENAI_BASE_URL  https://localhost:<port>/v1
//   LLMEDGE_KEY              a credential for every model
//   LLMEDGE_KEY_LIMITED      a credential for qwen only
//   LLMEDGE_MODELS           the models a full credential lists, comma-separated
//   NODE_EXTRA_CA_CERTS      the gateway's internal CA root
//
// A credential is whatever the gateway takes as a Bearer string (an access
// token, an API key): the SDK sends it as its API key.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.LLMEDGE_OPENAI_BASE_URL;
if (!baseURL) {
  throw new Error('LLMEDGE_OPENAI_BASE_URL is not set: run through e2e/sdk_test.go');
}
// No retries: each error class must reach the test as the gateway sent it.
const client = new OpenAI({ baseURL, apiKey: process.env.LLMEDGE_KEY, maxRetries: 0 });
const limited = new OpenAI({ baseURL, apiKey: process.env.LLMEDGE_KEY_LIMITED, maxRetries: 0 });
const messages = [
  { role: 'developer', content: 'Be terse.' },
  { role: 'user', content: [{ type: 'text', text: 'Say hello.' }] },
];

test('lists the models a credential may use', async () => {
  const ids = [];
  for await (const m of client.models.list()) {
    assert.equal(m.object, 'model');
    assert.ok(m.created > 0 && m.owned_by);
    ids.push(m.id);
  }
  assert.deepEqual(ids, process.env.LLMEDGE_MODELS.split(','));
  const mine = [];
  for await (const m of limited.models.list()) mine.push(m.id);
  assert.deepEqual(mine, ['qwen']);
  const one = await limited.models.retrieve('qwen');
  assert.equal(one.id, 'qwen');
});

let whole;

test('chat completion', async () => {
  const c = await client.chat.completions.create({
    model: 'qwen', messages, temperature: 0.5, top_p: 0.9, stop: ['END'], seed: 7, user: 'end-user-1',
  });
  assert.equal(c.object, 'chat.completion');
  assert.equal(c.model, 'qwen');
  assert.equal(c.id, `chatcmpl-${c._request_id}`, 'the id carries the X-Request-ID the SDK exposes');
  assert.equal(c.choices.length, 1);
  assert.equal(c.choices[0].message.role, 'assistant');
  assert.ok(c.choices[0].message.content.length > 0);
  assert.equal(c.choices[0].finish_reason, 'stop');
  assert.ok(c.usage.prompt_tokens > 0 && c.usage.completion_tokens === 8);
  assert.equal(c.usage.total_tokens, c.usage.prompt_tokens + c.usage.completion_tokens);
  whole = c.choices[0].message.content;

  const cut = await client.chat.completions.create({ model: 'qwen', messages, max_completion_tokens: 2 });
  assert.equal(cut.choices[0].finish_reason, 'length');
  assert.equal(cut.usage.completion_tokens, 2);

  const { data, response } = await client.chat.completions.create({ model: 'qwen', messages }).withResponse();
  assert.match(response.headers.get('server-timing'), /auth;dur=.*upstream;dur=.*total;dur=/);
  assert.equal(data.choices[0].message.content, whole, 'the replica is deterministic');
});

test('streaming with usage', async () => {
  // gemma's replica answers the same text as qwen's, but takes 300ms to
  // its first token: the stream opens with `: ping` comments.
  const stream = await client.chat.completions.create({
    model: 'gemma', messages, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  const roles = [];
  const finishes = [];
  let usage;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.choices.length === 0) {
      usage = chunk.usage;
      continue;
    }
    const { delta, finish_reason: finish } = chunk.choices[0];
    if (delta.role) roles.push(delta.role);
    if (delta.content) text += delta.content;
    if (finish) finishes.push(finish);
  }
  assert.deepEqual(roles, ['assistant']);
  assert.deepEqual(finishes, ['stop']);
  assert.equal(text, whole);
  assert.equal(usage.completion_tokens, 8);

  // The SDK's own accumulating helper builds the same message.
  const helper = client.chat.completions.stream({ model: 'qwen', messages, stream_options: { include_usage: true } });
  const done = await helper.finalChatCompletion();
  assert.equal(done.choices[0].message.role, 'assistant');
  assert.equal(done.choices[0].message.content, whole);
  assert.equal(done.usage.completion_tokens, 8);
});

// expectError runs call and checks the error class, status, code and param
// the SDK gives the caller.
async function expectError(call, Class, status, code, param) {
  await assert.rejects(call, (e) => {
    assert.ok(e instanceof Class, `${e.constructor.name} (${e.message}) is not a ${Class.name}`);
    assert.ok(e instanceof OpenAI.APIError);
    assert.equal(e.status, status);
    assert.equal(e.code, code);
    assert.equal(e.param, param);
    assert.ok(e.message.length > 0);
    return true;
  });
}

const hi = [{ role: 'user', content: 'hi' }];

test('a bad credential is an AuthenticationError', async () => {
  const stranger = new OpenAI({ baseURL, apiKey: 'sk-not-a-valid-key', maxRetries: 0 });
  await expectError(stranger.models.list(), OpenAI.AuthenticationError, 401, 'invalid_api_key', null);
  await expectError(stranger.chat.completions.create({ model: 'qwen', messages: hi }),
    OpenAI.AuthenticationError, 401, 'invalid_api_key', null);
});

test('a model outside the scope is a PermissionDeniedError', async () => {
  await expectError(limited.chat.completions.create({ model: 'gemma', messages: hi }),
    OpenAI.PermissionDeniedError, 403, 'model_not_allowed', 'model');
});

test('an unknown model is a NotFoundError', async () => {
  await expectError(client.chat.completions.create({ model: 'gpt-4o', messages: hi }),
    OpenAI.NotFoundError, 404, 'model_not_found', 'model');
  await expectError(limited.models.retrieve('gemma'), OpenAI.NotFoundError, 404, 'model_not_found', 'model');
});

test('a bad field is a BadRequestError naming it', async () => {
  await expectError(client.chat.completions.create({ model: 'qwen', messages: hi, temperature: 5 }),
    OpenAI.BadRequestError, 400, 'invalid_value', 'temperature');
  await expectError(client.chat.completions.create({ model: 'qwen', messages: hi, n: 2 }),
    OpenAI.BadRequestError, 400, 'unsupported_value', 'n');
  await expectError(client.chat.completions.create({
    model: 'qwen',
    messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }] }],
  }), OpenAI.BadRequestError, 400, 'unsupported_value', 'messages[0].content[1].type');
  // A replica's refusal of the prompt, in OpenAI's terms.
  await expectError(client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'far too many words for it' }] }),
    OpenAI.BadRequestError, 400, 'context_length_exceeded', 'messages');
});

test('saturation is a RateLimitError with Retry-After', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'busy', messages: hi }), (e) => {
    assert.ok(e instanceof OpenAI.RateLimitError, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.code, 'rate_limit_exceeded');
    assert.ok(Number(e.headers.get('retry-after')) >= 1);
    return true;
  });
});

test('failures on the server side are InternalServerErrors', async () => {
  for (const [model, status, code] of [['broken', 502, 'upstream_error'], ['empty', 503, 'model_unavailable'], ['slow', 504, 'upstream_timeout']]) {
    await assert.rejects(client.chat.completions.create({ model, messages: hi }), (e) => {
      assert.ok(e instanceof OpenAI.InternalServerError, `${model}: ${e.constructor.name}: ${e.message}`);
      assert.equal(e.status, status);
      assert.equal(e.type, 'server_error');
      assert.equal(e.code, code);
      return true;
    });
  }
});

test('a failure mid-stream is an APIError after the text so far', async () => {
  const stream = await client.chat.completions.create({ model: 'flaky', messages: hi, stream: true });
  let text = '';
  await assert.rejects(async () => {
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  }, (e) => {
    assert.ok(e instanceof OpenAI.APIError, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, undefined, 'no HTTP status: the stream had started');
    assert.equal(e.type, 'server_error');
    return true;
  });
  assert.ok(text.length > 0, 'the tokens before the failure arrived');
});
