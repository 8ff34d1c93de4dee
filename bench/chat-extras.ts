/**
 * What streaming and attachments cost: the CPU of showing a long answer as it is written
 * (every update re-chunks the text so far), against chunking the final text once; and
 * building a request whose live context holds images, against the same context without them.
 */
import { resolveAttachments } from '../src/attachments/index.js';
import { chunkMessage } from '../src/discord/chunk-message.js';
import { StreamedReply, type PartPoster, type StreamClock } from '../src/discord/streamed-reply.js';
import { makePng } from '../test/support/images.js';
import { median, timeMany, type BenchReport } from './harness.js';
import { benchConfig, fillHistory, openBenchRuntime } from './compaction-support.js';

const ANSWER = Array.from({ length: 320 }, (_, index) =>
  index % 40 === 10 ? '```ts' : index % 40 === 30 ? '```' : `line ${index}: some words of a long answer, streamed piece by piece`,
).join('\n');
const DELTA = 8;
/** Virtual time between deltas: a model writing about 800 characters a second. */
const DELTA_MS = 10;

async function streamOnce(): Promise<{ writes: number }> {
  // Virtual time moves only as the model writes; a sleeping streamer wakes when it has passed.
  let now = 0;
  const sleepers: Array<{ until: number; wake: () => void }> = [];
  const clock: StreamClock = {
    now: () => now,
    sleep: (ms) => new Promise<void>((wake) => sleepers.push({ until: now + ms, wake })),
  };
  const advance = async (ms: number): Promise<void> => {
    now += ms;
    for (const sleeper of sleepers.filter((candidate) => candidate.until <= now)) {
      sleepers.splice(sleepers.indexOf(sleeper), 1);
      sleeper.wake();
    }
    for (let turn = 0; turn < 4; turn += 1) await Promise.resolve();
  };
  let writes = 0;
  let ids = 0;
  const poster: PartPoster = {
    post: async () => {
      writes += 1;
      ids += 1;
      return `m${ids}`;
    },
    edit: async () => {
      writes += 1;
    },
    remove: async () => {},
  };
  const reply = new StreamedReply({ poster, clock });
  for (let at = DELTA; at < ANSWER.length; at += DELTA) {
    reply.update(ANSWER.slice(0, at));
    await advance(DELTA_MS);
  }
  let finished = false;
  const finishing = reply.finish(ANSWER).then(() => {
    finished = true;
  });
  while (!finished) await advance(DELTA_MS);
  await finishing;
  return { writes };
}

export async function run(): Promise<BenchReport> {
  const updates = Math.ceil(ANSWER.length / DELTA);
  const streamTimes = await timeMany(() => streamOnce(), { samples: 15, warmup: 3 });
  const chunkTimes = await timeMany(() => chunkMessage(ANSWER), { samples: 200 });
  const { writes } = await streamOnce();
  const parts = chunkMessage(ANSWER).length;

  // 300 live messages; in one channel 4 of them carry a 1,000×750 PNG each.
  const bench = await openBenchRuntime(benchConfig(10_000_000));
  await fillHistory(bench.db, 'plain', 300);
  await fillHistory(bench.db, 'images', 300);
  const png = makePng(1000, 750);
  for (const seq of [10, 100, 200, 290]) {
    const files = await resolveAttachments([{ name: `shot${seq}.png`, size: png.length, data: png }], { vision: true, maxImages: 4, maxChars: 20_000 });
    await bench.runtime.attachFiles('images', `images-m${seq}`, files);
  }
  const build = (channelId: string) => () => bench.runtime.buildModelRequest(channelId, { tools: [], maxTokens: 1024 });
  const plain: number[] = [];
  const images: number[] = [];
  for (let round = 0; round < 5; round += 1) {
    plain.push(...(await timeMany(build('plain'), { samples: 40 })));
    images.push(...(await timeMany(build('images'), { samples: 40 })));
  }
  const checkPlain = await timeMany(() => bench.runtime.check('plain'), { samples: 2000 });
  const checkImages = await timeMany(() => bench.runtime.check('images'), { samples: 2000 });
  await bench.close();

  const streamMs = median(streamTimes);
  return {
    name: 'chat-extras',
    metrics: [
      { name: `stream a ${ANSWER.length.toLocaleString('en-US')}-character answer in ${updates} updates (CPU, virtual clock)`, value: streamMs, unit: 'ms' },
      { name: 'per update', value: (streamMs * 1000) / updates, unit: 'µs' },
      { name: 'chunking the final text once', value: median(chunkTimes), unit: 'ms' },
      { name: `Discord writes for ${parts} parts over ${((updates * DELTA_MS) / 1000).toFixed(1)} s of generation, 1 edit/s/message`, value: writes, unit: 'writes' },
      { name: 'build request, 300 live messages', value: median(plain), unit: 'ms' },
      { name: 'build request, 300 live messages with 4 images', value: median(images), unit: 'ms' },
      { name: 'ratio images / plain', value: median(images) / median(plain), unit: '×' },
      { name: 'check() with images / without', value: median(checkImages) / median(checkPlain), unit: '×', target: '≈ 1 (O(1))' },
    ],
    notes: ['each image is stored once in SQLite and base64-encoded again for every request that carries it'],
  };
}
