/**
 * The chunker is linear in its input, whatever the input: time at 1,000,000 and at 4,000,000
 * characters (smaller inputs fit the young generation and the CPU caches, which flatters them), for prose with code blocks and for adversarial text (fence markers
 * everywhere, one endless line, a fence with an endless info string).
 */
import { chunkMessage } from '../src/discord/chunk-message.js';
import { median, timeMany, type BenchReport } from './harness.js';

const INPUTS: Record<string, (size: number) => string> = {
  'prose and code': (size) => {
    const unit = 'A paragraph of explanation that goes on for a while.\n```ts\nconst value = compute(42);\n```\n';
    return unit.repeat(Math.ceil(size / unit.length)).slice(0, size);
  },
  'fence markers everywhere': (size) => '``` '.repeat(Math.ceil(size / 4)).slice(0, size),
  'one endless line': (size) => 'x'.repeat(size),
  'endless info string': (size) => `see \`\`\`${'y'.repeat(size)}\n${'z'.repeat(2000)}`,
};

export async function run(): Promise<BenchReport> {
  const metrics = [];
  for (const [name, make] of Object.entries(INPUTS)) {
    const small = make(1_000_000);
    const large = make(4_000_000);
    const smallMs = median(await timeMany(() => chunkMessage(small), { samples: 9, warmup: 2 }));
    const largeMs = median(await timeMany(() => chunkMessage(large), { samples: 5, warmup: 1 }));
    metrics.push(
      { name: `${name}: 1,000,000 chars`, value: smallMs, unit: 'ms' },
      { name: `${name}: 4,000,000 chars`, value: largeMs, unit: 'ms' },
      { name: `${name}: ratio for 4× the input`, value: largeMs / smallMs, unit: '×', target: '≈ 4 (linear)' },
    );
  }
  return { name: 'chunk-message', metrics };
}
