import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  classifyAttachment,
  decodeUtf8Text,
  estimateImageTokens,
  IMAGE_TOKEN_CAP,
  MAX_IMAGE_BYTES,
  resolveAttachments,
  sniffImage,
} from '../src/attachments/index.js';
import { filesIn } from '../src/attachments/summary-note.js';
import { estimateSummaryTokens } from '../src/context/summary-text.js';
import { estimateEntryTokens } from '../src/context/token-estimate.js';
import type { IncomingMessage } from '../src/context/types.js';
import { markerFiles } from '../src/compaction/emergency.js';
import { openHarness, ScriptedSummarizer, tempDir, testConfig, userMessage } from './compaction-support.js';
import { makeGifHeader, makeJpegHeader, makePng, makeWebpHeader } from './support/images.js';
import { withOfflineApp } from './support/offline-app.js';

const OPTIONS = { vision: true, maxImages: 4, maxChars: 20_000 };

test('images are recognized by their bytes, with their size read from the header', () => {
  assert.deepEqual(sniffImage(makePng(1000, 750)), { mediaType: 'image/png', width: 1000, height: 750 });
  assert.deepEqual(sniffImage(makeGifHeader(320, 200)), { mediaType: 'image/gif', width: 320, height: 200 });
  assert.deepEqual(sniffImage(makeJpegHeader(1920, 1080)), { mediaType: 'image/jpeg', width: 1920, height: 1080 });
  assert.deepEqual(sniffImage(makeWebpHeader(800, 600)), { mediaType: 'image/webp', width: 800, height: 600 });
  assert.equal(sniffImage(Buffer.from('just text, named .png')), undefined);
  assert.equal(sniffImage(Buffer.alloc(0)), undefined);
  assert.equal(sniffImage(makePng(10, 10).subarray(0, 12)), undefined, 'a PNG cut before its header');
});

test('an image costs width × height / 750 tokens, capped at the documented maximum', () => {
  assert.equal(estimateImageTokens(1000, 750), 1000);
  assert.equal(estimateImageTokens(200, 200), 54);
  assert.equal(estimateImageTokens(4000, 3000), IMAGE_TOKEN_CAP);
  assert.equal(estimateImageTokens(0, 0), IMAGE_TOKEN_CAP, 'unknown size counts as the largest');
  assert.equal(estimateImageTokens(Number.NaN, 10), IMAGE_TOKEN_CAP);
  assert.equal(IMAGE_TOKEN_CAP, 1600);
});

test('files are classified by content type and name; text must be UTF-8 without NUL bytes', () => {
  assert.equal(classifyAttachment('plan.png', 'image/png'), 'image');
  assert.equal(classifyAttachment('photo.JPG', undefined), 'image');
  assert.equal(classifyAttachment('notes.md', undefined), 'text');
  assert.equal(classifyAttachment('data.csv', 'text/csv; charset=utf-8'), 'text');
  assert.equal(classifyAttachment('main.rs', 'application/octet-stream'), 'text');
  assert.equal(classifyAttachment('config', 'application/json'), 'text');
  assert.equal(classifyAttachment('archive.zip', 'application/zip'), 'binary');
  assert.equal(classifyAttachment('vector.svg', 'image/svg+xml'), 'binary');
  assert.equal(decodeUtf8Text(Buffer.from('héllo wörld')), 'héllo wörld');
  assert.equal(decodeUtf8Text(Buffer.from([0x68, 0x00, 0x69])), undefined);
  assert.equal(decodeUtf8Text(Buffer.from([0xff, 0xfe, 0x41])), undefined);
  const euro = Buffer.from('price: €');
  assert.equal(decodeUtf8Text(euro.subarray(0, euro.length - 1), { cut: true }), 'price: ', 'a character cut at the end is dropped');
});

test('resolving: images become base64 with their estimate, text is inlined or cut with a note, the rest stays a placeholder', async () => {
  const png = makePng(1000, 750);
  const resolved = await resolveAttachments(
    [
      { name: 'plan.png', size: png.length, contentType: 'image/png', data: png },
      { name: 'notes.md', size: 11, data: Buffer.from('# Notes\nhi\n') },
      { name: 'big.txt', size: 30_000, data: Buffer.from('a'.repeat(30_000)) },
      { name: 'fake.txt', size: 4, data: Buffer.from([0x00, 0x01, 0x02, 0x03]) },
      { name: 'not-really.png', size: 9, data: Buffer.from('plain txt') },
      { name: 'tool.zip', size: 4, contentType: 'application/zip', data: Buffer.from('PK..') },
    ],
    OPTIONS,
  );
  assert.deepEqual(resolved.map((file) => file.kind), ['image', 'text', 'text', 'file', 'file', 'file']);
  const image = resolved[0]!;
  assert.ok(image.kind === 'image');
  assert.equal(image.tokens, 1000);
  assert.equal(image.data, png.toString('base64'));
  const notes = resolved[1]!;
  assert.ok(notes.kind === 'text' && notes.text === '# Notes\nhi\n' && !notes.truncated);
  const big = resolved[2]!;
  assert.ok(big.kind === 'text' && big.truncated && big.text.length === 20_000);
  assert.match(String((resolved[3] as { note?: string }).note), /not UTF-8 text/);
  assert.match(String((resolved[4] as { note?: string }).note), /not a PNG, JPEG, GIF or WebP/);
  assert.equal((resolved[5] as { note?: string }).note, undefined);
});

test('resolving respects max_images_per_message, vision = false, max_attachment_chars = 0, the size limit and bad URLs', async () => {
  const png = makePng(10, 10);
  const five = Array.from({ length: 5 }, (_, index) => ({ name: `shot${index}.png`, size: png.length, data: png }));
  const limited = await resolveAttachments(five, { ...OPTIONS, maxImages: 4 });
  assert.equal(limited.filter((file) => file.kind === 'image').length, 4);
  assert.match(String((limited[4] as { note?: string }).note), /more than 4 images/);
  const blind = await resolveAttachments(five.slice(0, 1), { ...OPTIONS, vision: false });
  assert.equal(blind[0]!.kind, 'file');
  const noText = await resolveAttachments([{ name: 'a.txt', size: 1, data: Buffer.from('a') }], { ...OPTIONS, maxChars: 0 });
  assert.equal(noText[0]!.kind, 'file');
  const huge = await resolveAttachments([{ name: 'huge.png', size: MAX_IMAGE_BYTES + 1, url: 'http://127.0.0.1:9/never' }], OPTIONS);
  assert.match(String((huge[0] as { note?: string }).note), /too large/);
  const badScheme = await resolveAttachments([{ name: 'x.png', size: 10, url: 'file:///etc/passwd' }], OPTIONS);
  assert.ok(badScheme[0]!.kind === 'file' && badScheme[0]!.failed);
  const noSource = await resolveAttachments([{ name: 'x.txt', size: 10 }], OPTIONS);
  assert.ok(noSource[0]!.kind === 'file' && noSource[0]!.failed);
  const refused = await resolveAttachments([{ name: 'x.txt', size: 10, url: 'http://127.0.0.1:9/refused' }], OPTIONS);
  assert.ok(refused[0]!.kind === 'file' && refused[0]!.failed, 'a download that fails never throws');
});


function message(id: string, content: string, extra: { replyToMessageId?: string; authorName?: string } = {}) {
  return {
    messageId: id,
    channelId: 'c-files',
    authorId: `u-${extra.authorName ?? 'ana'}`,
    authorName: extra.authorName ?? 'Ana',
    role: 'user' as const,
    content,
    createdAt: Date.UTC(2026, 10, 1, 12, 0),
    ...(extra.replyToMessageId ? { replyToMessageId: extra.replyToMessageId } : {}),
  };
}

test('an attached image raises the estimate by exactly its token count, once, survives an edit, and leaves with a delete', async () => {
  await withOfflineApp('magpie-attach-', async (app) => {
    const runtime = app.runtime;
    await runtime.ingest(message('m1', 'look at this\n[attachment: plan.png]'));
    const before = (await runtime.status('c-files')).estimatedTokens;
    const png = makePng(1000, 750);
    const files = await resolveAttachments([{ name: 'plan.png', size: png.length, contentType: 'image/png', data: png }], OPTIONS);
    assert.equal(await runtime.attachFiles('c-files', 'm1', files), true);
    const entry = (await runtime.liveContext('c-files')).entries[0]!;
    assert.match(entry.content, /^look at this\n\[image: plan\.png, 1000×750, \d+ (B|KB)\]$/);
    assert.equal(entry.tokens, estimateEntryTokens(entry) + 1000);
    assert.equal((await runtime.status('c-files')).estimatedTokens, before + (estimateEntryTokens(entry) - estimateEntryTokens({ ...entry, content: 'look at this\n[attachment: plan.png]' })) + 1000);

    const request = await runtime.buildModelRequest('c-files', { tools: [], maxTokens: 100 });
    const blocks = request.messages[0]!.content as Array<{ type: string; source?: { data: string; media_type: string } }>;
    assert.deepEqual(blocks.map((block) => block.type), ['text', 'image']);
    assert.equal(blocks[1]!.source!.media_type, 'image/png');
    assert.equal(blocks[1]!.source!.data, png.toString('base64'));
    // With vision turned off afterwards (say, a model that cannot read images), none are sent.
    const seeing = app.config.current();
    app.config.replace({ ...seeing, defaults: { ...seeing.defaults, vision: false } });
    const blind = await runtime.buildModelRequest('c-files', { tools: [], maxTokens: 100 });
    assert.deepEqual((blind.messages[0]!.content as Array<{ type: string }>).map((block) => block.type), ['text']);
    app.config.replace(seeing);
    // The archive holds the placeholder, searchable, not the bytes.
    const archived = await app.memory.list({ location: { channelId: 'c-files' }, kind: 'transcript' });
    assert.match(archived[0]!.content, /\[image: plan\.png/);

    // An edit of the text keeps the image and its count.
    await runtime.editMessage('c-files', 'm1', 'look at this plan\n[image: plan.png, 1000×750, 1 KB]');
    const edited = (await runtime.liveContext('c-files')).entries[0]!;
    assert.equal(edited.tokens, estimateEntryTokens(edited) + 1000);

    // Deleted means gone: the image leaves with its message.
    await runtime.ingest(message('m2', 'something else'));
    await runtime.deleteMessages('c-files', ['m1']);
    const after = await runtime.buildModelRequest('c-files', { tools: [], maxTokens: 100 });
    assert.ok(!JSON.stringify(after.messages).includes(png.toString('base64').slice(0, 40)));
  });
});

test('a text file is inlined with its name and counted; when its message is compacted the summary names the files', async () => {
  await withOfflineApp('magpie-attach-', async (app) => {
    const runtime = app.runtime;
    await runtime.ingest(message('f1', 'here are my notes\n[attachment: notes.md]\n[attachment: chart.png]'));
    const png = makePng(200, 200);
    const files = await resolveAttachments(
      [
        { name: 'notes.md', size: 40, data: Buffer.from('Deploy on Friday.\nRollback plan: tag v2.') },
        { name: 'chart.png', size: png.length, data: png },
      ],
      OPTIONS,
    );
    await runtime.attachFiles('c-files', 'f1', files);
    const request = await runtime.buildModelRequest('c-files', { tools: [], maxTokens: 100 });
    const blocks = request.messages[0]!.content as Array<{ type: string; text?: string }>;
    assert.deepEqual(blocks.map((block) => block.type), ['text', 'text', 'image']);
    assert.equal(blocks[1]!.text, 'Attached file notes.md:\nDeploy on Friday.\nRollback plan: tag v2.');
    const entry = (await runtime.liveContext('c-files')).entries[0]!;
    const fileTokens = files.reduce((sum, file) => sum + (file.kind === 'file' ? 0 : file.tokens), 0);
    assert.equal(fileTokens, files[0]!.kind === 'text' ? files[0]!.tokens + 54 : -1, 'the text counts as its rendering, the 200×200 image as 54');
    assert.equal(entry.tokens, estimateEntryTokens(entry) + fileTokens);

    for (let index = 0; index < 12; index += 1) {
      await runtime.ingest(message(`fill${index}`, `filler message ${index} about the quarterly planning and what the team decided to do next week`, { authorName: 'Bo' }));
    }
    const outcome = await runtime.compactNow('c-files');
    assert.equal(outcome.status, 'completed');
    const summary = (await runtime.liveContext('c-files')).summaries.at(-1)!;
    assert.match(summary.content, /Shared in these messages: file notes\.md \(shared by Ana\); image chart\.png \(shared by Ana\)\./);
    // Out of the live context, the files no longer travel with requests.
    const later = await runtime.buildModelRequest('c-files', { tools: [], maxTokens: 100 });
    assert.ok(!JSON.stringify(later.messages).includes('Rollback plan'));
  });
});

test('a reply to a compacted message brings it, and a bounded chain, back from the archive; deleted ones stay gone', async () => {
  await withOfflineApp('magpie-attach-', async (app) => {
    const runtime = app.runtime;
    await runtime.ingest(message('a', 'The codename for the launch is BLUEBIRD.'));
    await runtime.ingest(message('b', 'And BLUEBIRD ships on the 14th.', { replyToMessageId: 'a', authorName: 'Bo' }));
    for (let index = 0; index < 12; index += 1) {
      await runtime.ingest(message(`fill${index}`, `filler message ${index} about lunch plans and the weather this weekend in town`, { authorName: 'Cy' }));
    }
    assert.equal((await runtime.compactNow('c-files')).status, 'completed');
    assert.ok(!(await runtime.liveContext('c-files')).entries.some((entry) => entry.messageId === 'a' || entry.messageId === 'b'));

    const entry = await runtime.ingest(message('c', 'what did you mean by this?', { replyToMessageId: 'b', authorName: 'Di' }));
    assert.ok(entry.tokens > estimateEntryTokens(entry), 'the reply context is counted into the message');
    const request = await runtime.buildModelRequest('c-files', { tools: [], maxTokens: 100 });
    const last = request.messages.at(-1)!.content as Array<{ type: string; text?: string }>;
    const context = last.find((block) => block.text?.includes('from the archive'))!;
    assert.ok(context, 'the archived messages are in the turn');
    assert.match(context.text!, /Ana: The codename for the launch is BLUEBIRD\.\n.*Bo: And BLUEBIRD ships on the 14th\./);
    assert.ok(last.indexOf(context) < last.findIndex((block) => block.text?.includes('what did you mean')), 'context comes before the question');

    // A reply to a message still in view adds nothing.
    const inView = await runtime.ingest(message('d', 'agreed', { replyToMessageId: 'c' }));
    assert.equal(inView.tokens, estimateEntryTokens(inView));

    await runtime.deleteMessages('c-files', ['a']);
    const afterDelete = JSON.stringify((await runtime.buildModelRequest('c-files', { tools: [], maxTokens: 100 })).messages);
    assert.ok(!afterDelete.includes('codename for the launch'), 'a deleted message never comes back');
    assert.ok(afterDelete.includes('ships on the 14th'));
  });
});

test('an emergency truncation marker names the images and files of the messages it drops, also once grown and after a restart', async () => {
  const dir = tempDir().path;
  // The system prompt alone is over the window: every message truncates at once (and the
  // window is large enough that the marker, names and all, never calls for a roll-up).
  const configValue = testConfig({ contextWindow: 4000, systemPrompt: 'x'.repeat(20_000) });
  const withFile = (index: number, placeholder: string, author = 'Ana'): IncomingMessage => ({
    ...userMessage('c-marker', index, { author }),
    content: `look at this\n${placeholder}`,
  });
  const first = await openHarness({ dir, configValue, summarizer: new ScriptedSummarizer() });
  await first.runtime.ingest(withFile(0, '[image: chart.png, 200×200, 1.2 kB]'));
  await first.runtime.ingest(userMessage('c-marker', 1));
  await first.runtime.ingest(withFile(2, '[attachment: report.pdf, 80 kB]', 'Bo'));
  // A message just in stays through its own check (it may be answered); the next check drops it.
  await first.runtime.check('c-marker');
  const [marker] = (await first.runtime.liveContext('c-marker')).summaries;
  assert.equal(marker!.kind, 'marker');
  assert.equal(
    marker!.content,
    '3 older messages were truncated; recall them with memory_search. Shared in these messages: image chart.png (shared by Ana); file report.pdf (shared by Bo).',
  );
  assert.equal(marker!.tokens, estimateSummaryTokens(marker!), 'the names are counted in the marker');
  await first.close({ keepDir: true });

  // After a restart the grown marker still names what it named, then what it drops now.
  const second = await openHarness({ dir, configValue, summarizer: new ScriptedSummarizer() });
  await second.runtime.ingest(withFile(3, '[file: notes.md, 40 B]'));
  await second.runtime.check('c-marker');
  assert.match(
    (await second.runtime.liveContext('c-marker')).summaries[0]!.content,
    /^4 older messages .*Shared in these messages: image chart\.png \(shared by Ana\); file report\.pdf \(shared by Bo\); file notes\.md \(shared by Ana\)\.$/,
  );
  // A marker is sent with every request: past 20 names, the rest are counted.
  for (let index = 4; index < 30; index += 1) await second.runtime.ingest(withFile(index, `[image: photo-${index}.jpg, 3 kB]`));
  await second.runtime.check('c-marker');
  const grown = (await second.runtime.liveContext('c-marker')).summaries[0]!.content;
  assert.equal(grown.match(/\(shared by /g)!.length, 20);
  assert.match(grown, /image photo-20\.jpg \(shared by Ana\) \(and 9 more files\)\.$/);
  assert.deepEqual(markerFiles(grown).named.length, 20);
  assert.equal(markerFiles(grown).more, 9);
  await second.close();
});

test('a summary names shared files, including those only attached (not shown to the model)', () => {
  assert.deepEqual(
    filesIn({ kind: 'message', authorName: 'Ana', content: 'see [attachment: plan.pdf, 2 MB, not shown: too large] and [image: a.png, 10×10, 1 kB]' }),
    ['file plan.pdf (shared by Ana)', 'image a.png (shared by Ana)'],
  );
  assert.deepEqual(filesIn({ kind: 'tool_result', authorName: 'Magpie', content: '[image: a.png, 1 kB]' }), [], 'tool traffic shares nothing');
});
