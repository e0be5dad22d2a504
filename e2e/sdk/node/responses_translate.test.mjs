// llmedge's Responses API translated to chat completions, for replicas
// that do not serve /v1/responses, through the official openai npm
// package: one answer, a stream through the SDK's stream helper (which
// checks the events' order, indexes and item ids as it accumulates them),
// and a two-turn function-calling exchange. Run by
// TestResponsesTranslationSDK (e2e/responses_translate_test.go), once per
// model in LLMEDGE_RESPONSES_MODELS: one with `responses translate`, one
// with `responses auto` whose replica answers /v1/responses with 404.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.LLMEDGE_OPENAI_BASE_URL;
if (!baseURL) {
  throw new Error('LLMEDGE_OPENAI_BASE_URL is not set: run through e2e/responses_translate_test.go');
}
const client = new OpenAI({ baseURL, apiKey: process.env.LLMEDGE_KEY, maxRetries: 0 });
const models = (process.env.LLMEDGE_RESPONSES_MODELS ?? '').split(',').filter(Boolean);

const weather = {
  type: 'function',
  name: 'get_weather',
  description: 'The weather in a city',
  strict: false,
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

for (const model of models) {
  test(`responses translated (${model}): one answer`, async () => {
    const r = await client.responses.create({
      model, instructions: 'Be terse.', input: 'Say hello.', max_output_tokens: 64,
      store: false, include: ['reasoning.encrypted_content'], prompt_cache_key: 'k1',
      // Codex CLI offers its web search to every provider: an offer left out.
      tools: [{ type: 'web_search', external_web_access: false }], tool_choice: 'auto',
    });
    assert.equal(r.object, 'response');
    assert.equal(r.model, model);
    assert.equal(r.status, 'completed');
    assert.ok(r.id.startsWith('resp_'));
    assert.ok(r.output_text.length > 0, 'output_text gathers the output');
    assert.equal(r.output.at(-1).type, 'message');
    assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);
    assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  });

  test(`responses translated (${model}): cut by max_output_tokens`, async () => {
    const r = await client.responses.create({ model, input: 'Say hello at length.', max_output_tokens: 2 });
    assert.equal(r.status, 'incomplete');
    assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  });

  test(`responses translated (${model}): the stream helper`, async () => {
    const stream = client.responses.stream({
      model, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Say hello.' }] }],
    });
    const types = [];
    let text = '';
    stream.on('event', (ev) => types.push(ev.type));
    stream.on('response.output_text.delta', (ev) => { text += ev.delta; });
    const final = await stream.finalResponse();
    assert.deepEqual(types.slice(0, 4),
      ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
    assert.deepEqual(types.slice(-4),
      ['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
    assert.ok(text.length > 0);
    assert.equal(final.output_text, text);
    assert.equal(final.model, model);
    assert.ok(final.usage.output_tokens > 0);
  });

  test(`responses translated (${model}): a two-turn function call`, async () => {
    // First turn: the model calls the function, streamed.
    const input = [{ role: 'user', content: 'What is the weather in Paris?' }];
    const stream = client.responses.stream({ model, input, tools: [weather], tool_choice: 'auto', parallel_tool_calls: false });
    let args = '';
    stream.on('response.function_call_arguments.delta', (ev) => { args += ev.delta; });
    const first = await stream.finalResponse();
    const calls = first.output.filter((o) => o.type === 'function_call');
    assert.equal(calls.length, 1, JSON.stringify(first.output));
    const [call] = calls;
    assert.equal(call.name, 'get_weather');
    assert.ok(call.call_id.length > 0);
    assert.equal(call.arguments, args);
    assert.equal(typeof JSON.parse(call.arguments), 'object');

    // Second turn: the call and its output go back; the model answers in text.
    input.push(...first.output, { type: 'function_call_output', call_id: call.call_id, output: '{"celsius":21}' });
    const second = await client.responses.create({ model, input, tools: [weather] });
    assert.equal(second.status, 'completed');
    assert.equal(second.output.filter((o) => o.type === 'function_call').length, 0, JSON.stringify(second.output));
    assert.ok(second.output_text.length > 0);
  });

  test(`responses translated (${model}): a hosted tool is refused, named`, async () => {
    await assert.rejects(
      client.responses.create({ model, input: 'Search.', tools: [{ type: 'file_search', vector_store_ids: ['vs_1'] }] }),
      (err) => {
        assert.ok(err instanceof OpenAI.BadRequestError, `got ${err}`);
        assert.equal(err.param, 'tools[0].type');
        assert.equal(err.code, 'unsupported_parameter');
        return true;
      },
    );
  });
}
