// OpenAI's Files and Batches API (issue 36) through the official openai
// npm package: upload, retrieve, list with auto-paging, download, create
// a batch, retrieve, list and cancel it, delete, and the errors as the
// SDK's classes. It runs with LLMEDGE_BATCH_API set, against a gateway
// that serves the API (the variables of sdk.test.mjs);
// LLMEDGE_KEY_OTHER_OWNER, when set, is another user's credential, which
// must see none of it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI, { toFile } from 'openai';

const enabled = Boolean(process.env.LLMEDGE_BATCH_API);
const baseURL = process.env.LLMEDGE_OPENAI_BASE_URL;

test('files and batches', { skip: !enabled && 'LLMEDGE_BATCH_API is not set' }, async () => {
  const client = new OpenAI({ baseURL, apiKey: process.env.LLMEDGE_KEY, maxRetries: 0 });
  const lines = [0, 1, 2].map((i) => JSON.stringify({
    custom_id: `r${i}`, method: 'POST', url: '/v1/chat/completions',
    body: { model: 'qwen', messages: [{ role: 'user', content: `hi ${i}` }] },
  }) + '\n').join('');

  const f = await client.files.create({ file: await toFile(Buffer.from(lines), 'requests.jsonl'), purpose: 'batch' });
  assert.equal(f.object, 'file');
  assert.equal(f.bytes, Buffer.byteLength(lines));
  assert.equal(f.filename, 'requests.jsonl');
  assert.equal(f.purpose, 'batch');
  assert.ok(f.created_at > 0 && 'expires_at' in f);

  assert.equal((await client.files.retrieve(f.id)).id, f.id);
  const ids = [];
  for await (const x of client.files.list({ purpose: 'batch', limit: 1 })) ids.push(x.id);
  assert.ok(ids.includes(f.id));
  const content = await client.files.content(f.id);
  assert.equal(await content.text(), lines);

  const b = await client.batches.create({
    input_file_id: f.id, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { job: 'sdk' },
  });
  assert.equal(b.object, 'batch');
  assert.equal(b.input_file_id, f.id);
  assert.equal(b.completion_window, '24h');
  assert.deepEqual(b.metadata, { job: 'sdk' });
  assert.ok(b.expires_at > b.created_at);
  assert.equal(b.completed_at, null);
  assert.equal(typeof b.request_counts.total, 'number');
  assert.equal((await client.batches.retrieve(b.id)).id, b.id);
  const page = await client.batches.list({ limit: 100 });
  assert.equal(page.data[0].id, b.id);

  // Cancelled while it runs, or already finished (a fast gateway): 409.
  try {
    const c = await client.batches.cancel(b.id);
    assert.ok(['cancelling', 'cancelled'].includes(c.status), c.status);
  } catch (e) {
    assert.ok(e instanceof OpenAI.ConflictError, String(e));
  }

  await assert.rejects(
    client.batches.create({ input_file_id: f.id, endpoint: '/v1/moderations', completion_window: '24h' }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'endpoint' && e.code === 'unsupported_value',
  );
  await assert.rejects(client.batches.retrieve('batch_none'), OpenAI.NotFoundError);

  if (process.env.LLMEDGE_KEY_OTHER_OWNER) {
    const other = new OpenAI({ baseURL, apiKey: process.env.LLMEDGE_KEY_OTHER_OWNER, maxRetries: 0 });
    await assert.rejects(other.files.retrieve(f.id), OpenAI.NotFoundError);
    await assert.rejects(other.files.content(f.id), OpenAI.NotFoundError);
    await assert.rejects(other.batches.retrieve(b.id), OpenAI.NotFoundError);
    await assert.rejects(other.batches.cancel(b.id), OpenAI.NotFoundError);
    for await (const x of other.batches.list()) assert.notEqual(x.id, b.id);
  }

  const d = await client.files.delete(f.id);
  assert.deepEqual(d, { id: f.id, object: 'file', deleted: true });
  await assert.rejects(client.files.retrieve(f.id), OpenAI.NotFoundError);
});
