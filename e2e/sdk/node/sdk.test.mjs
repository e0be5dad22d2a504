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
import { standardFunction, standardResponseFormat } from 'openai/helpers/standard-schema';

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
  // The replica's own id is kept; the gateway's request id is the
  // X-Request-ID the SDK exposes.
  assert.match(c.id, /^chatcmpl-/);
  assert.notEqual(c.id, `chatcmpl-${c._request_id}`);
  assert.ok(c._request_id);
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
  await expectError(limited.completions.create({ model: 'gemma', prompt: 'hi' }),
    OpenAI.PermissionDeniedError, 403, 'model_not_allowed', 'model');
  await expectError(limited.embeddings.create({ model: 'gemma', input: 'hi' }),
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
  await expectError(client.chat.completions.create({ model: 'qwen', messages: hi, n: 129 }),
    OpenAI.BadRequestError, 400, 'invalid_value', 'n');
  await expectError(client.completions.create({ model: 'qwen', prompt: 'hi', max_tokens: 0 }),
    OpenAI.BadRequestError, 400, 'invalid_value', 'max_tokens');
  await expectError(client.embeddings.create({ model: 'qwen', input: [] }),
    OpenAI.BadRequestError, 400, 'empty_array', 'input');
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

// ---- what OpenAI-compatible replicas take, carried through (issue 20) ----

// The arguments of get_weather, as a JSON Schema and as a check.
const weatherParams = {
  type: 'object',
  properties: {
    city: { type: 'string' },
    days: { type: 'integer', minimum: 1, maximum: 7 },
  },
  required: ['city', 'days'],
  additionalProperties: false,
};
const isWeatherArgs = (v) => typeof v === 'object' && v !== null && typeof v.city === 'string' &&
  Number.isInteger(v.days) && v.days >= 1 && v.days <= 7 && Object.keys(v).length === 2;
const weatherTools = [{
  type: 'function',
  function: { name: 'get_weather', description: 'The weather in a city for some days', parameters: weatherParams },
}];
const askWeather = [{ role: 'user', content: 'What is the weather in Paris this week?' }];

// A Standard Schema validator written out by hand: the pinned packages
// have no validation library, and the SDK's helpers take any validator
// with a `~standard` member.
function standard(check) {
  return {
    '~standard': {
      version: 1,
      vendor: 'llmedge-tests',
      validate: (value) => (check(value) ? { value } : { issues: [{ message: `does not match: ${JSON.stringify(value)}` }] }),
    },
  };
}

test('a tool-calling round trip', async () => {
  const first = await client.chat.completions.create({ model: 'qwen', messages: askWeather, tools: weatherTools });
  assert.equal(first.model, 'qwen');
  const choice = first.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.ok(call.id);
  assert.ok(isWeatherArgs(JSON.parse(call.function.arguments)), call.function.arguments);

  // The assistant's message as the SDK returned it, then the tool's
  // result: the replica answers in text.
  const second = await client.chat.completions.create({
    model: 'qwen',
    tools: weatherTools,
    messages: [...askWeather, choice.message, { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temp: 21, sky: 'clear' }) }],
  });
  assert.equal(second.choices[0].finish_reason, 'stop');
  assert.ok(second.choices[0].message.content.length > 0);
  assert.ok(!second.choices[0].message.tool_calls?.length);
  assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens, 'the tool call and its result were in the prompt');
});

test('streamed tool calls, through the SDK accumulator', async () => {
  const whole = await client.chat.completions.create({ model: 'qwen', messages: askWeather, tools: weatherTools });
  const stream = client.chat.completions.stream({ model: 'qwen', messages: askWeather, tools: weatherTools });
  const done = [];
  stream.on('tool_calls.function.arguments.done', (e) => done.push(e));
  let deltas = 0;
  stream.on('chunk', (c) => { if (c.choices[0]?.delta?.tool_calls) deltas++; });
  const final = await stream.finalChatCompletion();
  assert.ok(deltas >= 3, `the arguments came in ${deltas} deltas`);
  const msg = final.choices[0].message;
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.equal(msg.tool_calls.length, 1);
  assert.equal(msg.tool_calls[0].function.name, 'get_weather');
  assert.equal(msg.tool_calls[0].function.arguments, whole.choices[0].message.tool_calls[0].function.arguments,
    'the replica is deterministic: the same call streamed and whole');
  assert.equal(done.length, 1);
  assert.equal(done[0].name, 'get_weather');
  assert.ok(isWeatherArgs(done[0].parsed_arguments ?? JSON.parse(done[0].arguments)));
});

test('a parse-only tool, its arguments parsed by the SDK', async () => {
  const tool = standardFunction({ name: 'get_weather', parameters: standard(isWeatherArgs), schema: weatherParams });
  const c = await client.chat.completions.parse({ model: 'qwen', messages: askWeather, tools: [tool] });
  const call = c.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'get_weather');
  assert.ok(isWeatherArgs(call.function.parsed_arguments), JSON.stringify(call.function));
});

test('a structured output parsed by the SDK helper', async () => {
  const schema = {
    type: 'object',
    properties: {
      temp: { type: 'number', minimum: -40, maximum: 50 },
      sky: { type: 'string', enum: ['clear', 'cloudy', 'rain'] },
      hours: { type: 'array', items: { type: 'integer', minimum: 0, maximum: 23 } },
    },
    required: ['temp', 'sky', 'hours'],
    additionalProperties: false,
  };
  const isForecast = (v) => typeof v === 'object' && v !== null && typeof v.temp === 'number' && v.temp >= -40 && v.temp <= 50 &&
    ['clear', 'cloudy', 'rain'].includes(v.sky) && Array.isArray(v.hours) && v.hours.every((h) => Number.isInteger(h) && h >= 0 && h <= 23);
  const c = await client.chat.completions.parse({
    model: 'qwen', messages: askWeather, response_format: standardResponseFormat(standard(isForecast), 'forecast', { schema }),
  });
  const parsed = c.choices[0].message.parsed;
  assert.ok(isForecast(parsed), c.choices[0].message.content);
  assert.deepEqual(parsed, JSON.parse(c.choices[0].message.content));

  // json_object, parsed by hand.
  const o = await client.chat.completions.create({ model: 'qwen', messages: askWeather, response_format: { type: 'json_object' } });
  assert.equal(typeof JSON.parse(o.choices[0].message.content), 'object');
});

test('several choices, logprobs, and what else the replica takes', async () => {
  const c = await client.chat.completions.create({
    model: 'qwen', messages: askWeather, n: 2, logprobs: true, top_logprobs: 2, seed: 7,
    frequency_penalty: 0.5, presence_penalty: -0.5, logit_bias: { 50256: -100 }, reasoning_effort: 'low',
    // A vendor's own member, as the SDK passes unknown members.
    chat_template_kwargs: { enable_thinking: false },
  });
  assert.equal(c.choices.length, 2);
  assert.notEqual(c.choices[0].message.content, c.choices[1].message.content);
  for (const ch of c.choices) {
    assert.equal(ch.logprobs.content.length, 8);
    assert.equal(ch.logprobs.content[0].top_logprobs.length, 2);
  }
  assert.equal(c.usage.completion_tokens, 16);
});

test('embeddings, as floats and as base64', async () => {
  // The SDK asks for base64 unless told otherwise, and decodes it.
  const e = await client.embeddings.create({ model: 'qwen', input: ['first text', 'second text'] });
  assert.equal(e.object, 'list');
  assert.equal(e.model, 'qwen');
  assert.equal(e.data.length, 2);
  assert.equal(e.data[1].index, 1);
  const norm = Math.hypot(...e.data[0].embedding);
  assert.ok(Math.abs(norm - 1) < 1e-4, `a unit vector, norm ${norm}`);
  assert.ok(e.usage.prompt_tokens > 0);
  const f = await client.embeddings.create({ model: 'qwen', input: ['first text', 'second text'], encoding_format: 'float' });
  for (let i = 0; i < 2; i++) {
    assert.deepEqual(f.data[i].embedding.map((x) => x.toFixed(5)), e.data[i].embedding.map((x) => x.toFixed(5)));
  }
  const small = await client.embeddings.create({ model: 'qwen', input: 'one', dimensions: 4, encoding_format: 'float' });
  assert.equal(small.data[0].embedding.length, 4);
});

test('completions, whole and streamed', async () => {
  const c = await client.completions.create({ model: 'qwen', prompt: 'Once upon a time', max_tokens: 5 });
  assert.equal(c.object, 'text_completion');
  assert.equal(c.model, 'qwen');
  assert.equal(c.choices[0].finish_reason, 'length');
  assert.ok(c.choices[0].text.length > 0);
  assert.equal(c.usage.completion_tokens, 5);

  const stream = await client.completions.create({
    model: 'qwen', prompt: 'Once upon a time', max_tokens: 5, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let usage;
  for await (const chunk of stream) {
    assert.equal(chunk.model, 'qwen');
    if (chunk.usage) usage = chunk.usage;
    for (const ch of chunk.choices) text += ch.text;
  }
  assert.equal(text, c.choices[0].text, 'the replica is deterministic');
  assert.equal(usage.completion_tokens, 5);
});
