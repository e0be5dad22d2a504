// llmedge's Anthropic-compatible API through the official @anthropic-ai/sdk
// npm package.
//
// e2e/anthropic_test.go (TestAnthropicSDK) starts a real gateway (the
// fixture of that file: qwen carried through to a replica that serves
// /v1/messages, gemma translated to chat completions, limited at one
// request a minute, flaky failing mid-stream) and runs this file with
// node --test, passing:
//
//   LLMEDGE_ANTHROPIC_BASE_URL  https://localhost:<port>
//   LLMEDGE_KEY                 a credential for every model
//   LLMEDGE_KEY_LIMITED         a credential for qwen only
//   NODE_EXTRA_CA_CERTS         the gateway's internal CA root
//
// A credential is whatever the gateway takes as a Bearer string (an access
// token, an API key): the SDK sends it as its API key.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';

const baseURL = process.env.LLMEDGE_ANTHROPIC_BASE_URL;
if (!baseURL) {
  throw new Error('LLMEDGE_ANTHROPIC_BASE_URL is not set: run through e2e/anthropic_test.go');
}
const key = process.env.LLMEDGE_KEY;
// No retries: each error class must reach the test as the gateway sent it.
const client = new Anthropic({ baseURL, apiKey: key, maxRetries: 0 });
const limited = new Anthropic({ baseURL, apiKey: process.env.LLMEDGE_KEY_LIMITED, maxRetries: 0 });
// The key as x-api-key, as earlier SDKs and many tools send it.
const byHeader = new Anthropic({ baseURL, maxRetries: 0, defaultHeaders: { 'X-Api-Key': key, Authorization: null } });
// An OAuth-style bearer token (the SDK's authToken).
const byToken = new Anthropic({ baseURL, authToken: key, maxRetries: 0 });

const system = 'Be terse.';
const messages = [{ role: 'user', content: [{ type: 'text', text: 'Say' }, { type: 'text', text: 'hello.' }] }];
const tools = [{
  name: 'get_weather',
  description: 'The weather of a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}];

// Both modes: carried through (qwen) and translated (gemma).
for (const model of ['qwen', 'gemma']) {
  test(`${model}: messages.create, every way to give the key`, async () => {
    const texts = [];
    for (const c of [client, byHeader, byToken]) {
      const { data: m, response } = await c.messages.create({ model, max_tokens: 64, system, messages }).withResponse();
      assert.equal(m.type, 'message');
      assert.equal(m.role, 'assistant');
      assert.equal(m.model, model);
      assert.ok(m.id.startsWith('msg_'));
      assert.equal(m.stop_reason, 'end_turn');
      assert.equal(m.content.length, 1);
      assert.equal(m.content[0].type, 'text');
      assert.equal(m.usage.output_tokens, 8);
      assert.ok(m.usage.input_tokens > 0);
      assert.equal(m._request_id, response.headers.get('x-request-id'), 'the SDK exposes the request ID');
      texts.push(m.content[0].text);
    }
    assert.equal(new Set(texts).size, 1, 'the replica is deterministic');

    const cut = await client.messages.create({ model, max_tokens: 2, messages });
    assert.equal(cut.stop_reason, 'max_tokens');
    assert.equal(cut.usage.output_tokens, 2);
  });

  test(`${model}: the stream helper and the raw events`, async () => {
    const whole = await client.messages.create({ model, max_tokens: 64, system, messages });
    const stream = client.messages.stream({ model, max_tokens: 64, system, messages });
    let text = '';
    stream.on('text', (delta) => { text += delta; });
    const final = await stream.finalMessage();
    assert.equal(text, whole.content[0].text);
    assert.equal(final.content[0].text, whole.content[0].text);
    assert.equal(final.model, model);
    assert.equal(final.stop_reason, 'end_turn');
    assert.equal(final.usage.output_tokens, 8);
    assert.equal(final.usage.input_tokens, whole.usage.input_tokens);

    const raw = await client.messages.create({ model, max_tokens: 64, system, messages, stream: true });
    const types = [];
    for await (const event of raw) types.push(event.type);
    assert.deepEqual(types, ['message_start', 'content_block_start', ...Array(8).fill('content_block_delta'),
      'content_block_stop', 'message_delta', 'message_stop']);
  });

  test(`${model}: a tool round trip`, async () => {
    const ask = { model, max_tokens: 64, tools, tool_choice: { type: 'any' }, messages: [{ role: 'user', content: 'Weather in Paris?' }] };
    const call = await client.messages.create(ask);
    assert.equal(call.stop_reason, 'tool_use');
    const use = call.content.find((b) => b.type === 'tool_use');
    assert.equal(use.name, 'get_weather');
    assert.equal(typeof use.input.city, 'string');

    // Streamed, the helper builds the same call from input_json_delta events.
    const streamed = await client.messages.stream(ask).finalMessage();
    const streamedUse = streamed.content.find((b) => b.type === 'tool_use');
    assert.deepEqual(streamedUse.input, use.input);
    assert.equal(streamed.stop_reason, 'tool_use');

    const answer = await client.messages.create({
      model, max_tokens: 64, tools,
      messages: [
        ...ask.messages,
        { role: 'assistant', content: call.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Sunny, 21 C' }] },
      ],
    });
    assert.equal(answer.stop_reason, 'end_turn');
    assert.ok(answer.content[0].text.length > 0);
  });
}

// Claude Code's request (2.1.x), as the SDK's beta API sends it, to a
// model translated to chat completions: every member it sends by default is
// carried, and the engine's reasoning comes back as a thinking block the
// SDK's stream helper builds, signed (Claude Code drops one that is not).
test('gemma: Claude Code\'s request shape, thinking streamed back', async () => {
  const params = {
    model: 'gemma',
    max_tokens: 64,
    system: [{ type: 'text', text: system, cache_control: { type: 'ephemeral' } }],
    messages: [...messages, { role: 'system', content: 'The working directory is /tmp/project.' }],
    tools: tools.map((t) => ({ ...t, cache_control: { type: 'ephemeral' } })),
    thinking: { type: 'adaptive' },
    context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
    output_config: { effort: 'high' },
    metadata: { user_id: JSON.stringify({ device_id: 'd', session_id: 's' }) },
    betas: ['interleaved-thinking-2025-05-14', 'context-management-2025-06-27', 'effort-2025-11-24'],
  };
  const stream = client.beta.messages.stream(params);
  let thinking = '';
  stream.on('thinking', (delta) => { thinking += delta; });
  const call = await stream.finalMessage();
  assert.equal(call.stop_reason, 'tool_use');
  assert.deepEqual(call.content.map((b) => b.type), ['thinking', 'tool_use']);
  assert.equal(call.content[0].thinking, thinking);
  assert.ok(thinking.length > 0);
  assert.ok(call.content[0].signature.length > 0, 'the thinking block is signed');

  // The next turn sends the thinking block back, with the tool's result.
  const use = call.content[1];
  const answer = await client.beta.messages.create({
    ...params,
    messages: [
      ...params.messages,
      { role: 'assistant', content: call.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Sunny', cache_control: { type: 'ephemeral' } }] },
    ],
  });
  assert.equal(answer.stop_reason, 'end_turn');
  assert.deepEqual(answer.content.map((b) => b.type), ['thinking', 'text']);
  assert.ok(answer.content[0].signature.length > 0);
});

// qwen's replica counts itself; gemma's (translated) with its engine's
// tokenizer; olla's protocol (Ollama's /api/chat) cannot count.
test('count_tokens where the replica counts', async () => {
  for (const model of ['qwen', 'gemma']) {
    const { input_tokens: n } = await client.messages.countTokens({ model, system, messages });
    const m = await client.messages.create({ model, max_tokens: 8, system, messages });
    assert.equal(n, m.usage.input_tokens, model);
  }
  await expectError(client.messages.countTokens({ model: 'olla', messages }), Anthropic.NotFoundError, 404, 'not_found_error');
});

// expectError runs call and checks the error class, status and type the
// SDK gives the caller.
async function expectError(call, Class, status, type) {
  await assert.rejects(call, (e) => {
    assert.ok(e instanceof Class, `${e.constructor.name} (${e.message}) is not a ${Class.name}`);
    assert.ok(e instanceof Anthropic.APIError);
    assert.equal(e.status, status);
    assert.equal(e.type, type);
    assert.ok(e.apiMessage.length > 0);
    return true;
  });
}

const hi = [{ role: 'user', content: 'hi' }];

test('a bad key is an AuthenticationError', async () => {
  for (const stranger of [
    new Anthropic({ baseURL, apiKey: 'sk-ant-not-a-key', maxRetries: 0 }),
    new Anthropic({ baseURL, maxRetries: 0, defaultHeaders: { 'X-Api-Key': 'sk-ant-not-a-key', Authorization: null } }),
  ]) {
    await expectError(stranger.messages.create({ model: 'qwen', max_tokens: 8, messages: hi }),
      Anthropic.AuthenticationError, 401, 'authentication_error');
  }
});

test('a model outside the scope is a PermissionDeniedError', async () => {
  await expectError(limited.messages.create({ model: 'gemma', max_tokens: 8, messages: hi }),
    Anthropic.PermissionDeniedError, 403, 'permission_error');
});

test('an unknown model is a NotFoundError', async () => {
  await expectError(client.messages.create({ model: 'claude-opus-4-5', max_tokens: 8, messages: hi }),
    Anthropic.NotFoundError, 404, 'not_found_error');
});

test('a bad field is a BadRequestError naming it', async () => {
  await assert.rejects(client.messages.create({ model: 'qwen', max_tokens: 8, temperature: 3, messages: hi }), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.type, 'invalid_request_error');
    assert.match(e.apiMessage, /^temperature: /);
    return true;
  });
  await expectError(client.messages.create({ model: 'qwen', messages: hi }), Anthropic.BadRequestError, 400, 'invalid_request_error');
});

test('a rate limit is a RateLimitError with retry-after', async () => {
  await client.messages.create({ model: 'limited', max_tokens: 8, messages: hi });
  await assert.rejects(client.messages.create({ model: 'limited', max_tokens: 8, messages: hi }), (e) => {
    assert.ok(e instanceof Anthropic.RateLimitError, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.type, 'rate_limit_error');
    assert.ok(Number(e.headers.get('retry-after')) >= 1);
    return true;
  });
});

test('a failure mid-stream is an APIError after the text so far', async () => {
  const stream = await client.messages.create({ model: 'flaky', max_tokens: 8, messages: hi, stream: true });
  let text = '';
  await assert.rejects(async () => {
    for await (const event of stream) {
      if (event.type === 'content_block_delta') text += event.delta.text;
    }
  }, (e) => {
    assert.ok(e instanceof Anthropic.APIError, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, undefined, 'no HTTP status: the stream had started');
    assert.equal(e.type, 'api_error');
    return true;
  });
  assert.ok(text.length > 0, 'the tokens before the failure arrived');
});
