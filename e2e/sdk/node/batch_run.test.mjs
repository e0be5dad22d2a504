// OpenAI's Batch API through the official openai npm package: upload,
// create, poll, download, cancel. e2e/batch_test.go starts a gateway with
// batches on and runs this file (beside batch.test.mjs) with node --test (the environment of
// sdk.test.mjs, and LLMEDGE_BATCH set).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI, { toFile } from 'openai';

const baseURL = process.env.LLMEDGE_OPENAI_BASE_URL;
if (!baseURL || !process.env.LLMEDGE_BATCH) {
  throw new Error('LLMEDGE_OPENAI_BASE_URL or LLMEDGE_BATCH is not set: run through e2e/batch_test.go');
}
const client = new OpenAI({ baseURL, apiKey: process.env.LLMEDGE_KEY, maxRetries: 0 });
const other = new OpenAI({ baseURL, apiKey: process.env.LLMEDGE_KEY_LIMITED, maxRetries: 0 });

function lines(n, tag) {
  let s = '';
  for (let i = 0; i < n; i++) {
    s += JSON.stringify({
      custom_id: `${tag}-${i}`, method: 'POST', url: '/v1/chat/completions',
      body: { model: 'qwen', max_tokens: 8, messages: [{ role: 'user', content: `Line ${i}` }] },
    }) + '\n';
  }
  return s;
}

async function until(id, final, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const b = await client.batches.retrieve(id);
    if (final.includes(b.status)) return b;
    assert.ok(Date.now() < deadline, `batch ${id} still ${b.status}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test('a batch runs to its end, every request answered once', async () => {
  const file = await client.files.create({ file: await toFile(Buffer.from(lines(25, 'node')), 'in.jsonl'), purpose: 'batch' });
  assert.equal(file.object, 'file');
  assert.equal(file.purpose, 'batch');
  const created = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
  assert.equal(created.object, 'batch');
  const b = await until(created.id, ['completed', 'failed', 'expired', 'cancelled'], 120_000);
  assert.equal(b.status, 'completed');
  assert.deepEqual(b.request_counts, { total: 25, completed: 25, failed: 0 });
  const text = await (await client.files.content(b.output_file_id)).text();
  const ids = text.trim().split('\n').map((l) => JSON.parse(l)).map((o) => {
    assert.equal(o.response.status_code, 200);
    assert.equal(o.error, null);
    assert.ok(o.response.body.choices[0].message.content);
    return o.custom_id;
  });
  assert.equal(new Set(ids).size, 25);
  assert.equal(ids.length, 25);
  // Another user cannot see it.
  await assert.rejects(other.batches.retrieve(b.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(other.files.content(b.output_file_id), (e) => e instanceof OpenAI.NotFoundError);
});

test('a cancelled batch ends cancelled', async () => {
  const file = await client.files.create({ file: await toFile(Buffer.from(lines(3000, 'cancel')), 'big.jsonl'), purpose: 'batch' });
  const created = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
  const cancelling = await client.batches.cancel(created.id);
  assert.ok(['cancelling', 'cancelled'].includes(cancelling.status), cancelling.status);
  const b = await until(created.id, ['cancelled', 'completed'], 120_000);
  assert.equal(b.status, 'cancelled');
  assert.ok(b.cancelled_at > 0);
  assert.ok(b.request_counts.completed < 3000);
});

test('a bad batch is refused with the SDK\'s error', async () => {
  await assert.rejects(
    client.batches.create({ input_file_id: 'file-nope', endpoint: '/v1/chat/completions', completion_window: '24h' }),
    (e) => e instanceof OpenAI.APIError && e.status >= 400 && e.status < 500);
  await assert.rejects(
    client.files.create({ file: await toFile(Buffer.from('x'), 'x.txt'), purpose: 'fine-tune' }),
    (e) => e instanceof OpenAI.BadRequestError);
});
