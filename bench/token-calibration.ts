/**
 * How far the 4-characters-per-token estimate is from a real tokenizer, per kind of text, and
 * how far it is once calibrated the way a channel calibrates (factor from the first requests,
 * smoothed, then applied to the rest).
 *
 * The real count comes from `@anthropic-ai/tokenizer` (Anthropic's published tokenizer, a
 * dev dependency used here only): an honest proxy for what the API reports in
 * `usage.input_tokens`, not the exact count of today's models.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { countTokens } from '@anthropic-ai/tokenizer';
import { observe, UNCALIBRATED, type Calibration } from '../src/context/calibration.js';
import { estimateEntryTokens } from '../src/context/token-estimate.js';
import type { BenchReport } from './harness.js';

/** Chinese chat lines written for this benchmark (plain everyday talk about a release); the window tests replay them too. */
export const CHINESE = [
  '大家好，今天下午三点我们在二号会议室讨论新版本的发布计划。',
  '我这边的接口测试已经完成了百分之八十，剩下的部分明天上午可以做完。',
  '数据库迁移脚本需要再检查一遍，上次在测试环境里出现了超时的问题。',
  '请把用户反馈整理成表格，按照严重程度排序，周五之前发给我。',
  '前端页面的加载速度还是太慢了，首页要三秒多才能显示出来。',
  '我建议先把缓存加上，再看看图片能不能压缩得更小一些。',
  '客户那边说希望下个月初就能用上新的报表功能，时间有点紧。',
  '如果人手不够的话，我们可以先把导出功能放到下一个版本里。',
  '昨天晚上的服务器告警是因为磁盘快满了，我已经清理过日志了。',
  '以后日志要按天切分，保留最近三十天的就可以，其他的自动删除。',
  'これは日本語のテストです。明日の会議は十時からに変更になりました。',
  '好的，那就这么定了，会后我把会议纪要发到群里，大家注意查收。',
];

function repoRoot(): string {
  // dist/bench/token-calibration.js → the repository root.
  return path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
}

/** English prose: the paragraphs of this repository's README and docs/ pages (no tables, no code). */
function latinMessages(): string[] {
  const docs = path.join(repoRoot(), 'docs');
  const pages = ['README.md', ...readdirSync(docs).filter((name) => name.endsWith('.md')).sort().map((name) => path.join('docs', name))];
  const text = pages.map((page) => readFileSync(path.join(repoRoot(), page), 'utf8')).join('\n');
  let inCode = false;
  const lines: string[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) inCode = !inCode;
    else if (!inCode && /^[A-Z][a-z]/.test(line) && line.length > 60) lines.push(line);
  }
  return lines;
}

/** Code: this repository's own TypeScript sources, one file section of ~40 lines per message; the window tests replay them too. */
export function codeMessages(): string[] {
  const directory = path.join(repoRoot(), 'src', 'channel');
  const messages: string[] = [];
  for (const file of readdirSync(directory).sort()) {
    if (!file.endsWith('.ts')) continue;
    const lines = readFileSync(path.join(directory, file), 'utf8').split('\n');
    for (let start = 0; start < lines.length; start += 40) messages.push(lines.slice(start, start + 40).join('\n'));
  }
  return messages;
}

interface Row {
  kind: string;
  messages: number;
  characters: number;
  estimate: number;
  real: number;
  calibratedError: number;
  factor: number;
}

/**
 * Replays the messages as one channel: the estimate of the context after each message is the
 * sum of the per-message estimates; the real count is the tokenizer's count of the same texts
 * (speaker and framing included in both). The factor learns from every fifth "request".
 */
function measure(kind: string, texts: readonly string[]): Row {
  let estimate = 0;
  let real = 0;
  let characters = 0;
  let calibration: Calibration = { ...UNCALIBRATED };
  for (const [index, content] of texts.entries()) {
    estimate += estimateEntryTokens({ kind: 'message', authorName: 'ana', content });
    // The framing the model really sees around a message: its speaker and a separator.
    real += countTokens(`ana: ${content}\n\n`);
    characters += content.length;
    if (index % 5 === 4) calibration = observe(calibration, estimate, real) ?? calibration;
  }
  const calibrated = estimate * calibration.factor;
  return { kind, messages: texts.length, characters, estimate, real, calibratedError: (calibrated - real) / real, factor: calibration.factor };
}

export async function run(): Promise<BenchReport> {
  const chinese = Array.from({ length: 60 }, (_, index) => CHINESE[index % CHINESE.length]!);
  const rows = [measure('Latin prose (README and docs)', latinMessages()), measure('CJK chat', chinese), measure('TypeScript code (src/channel)', codeMessages())];
  const metrics = rows.flatMap((row) => [
    { name: `${row.kind}: characters per real token`, value: row.characters / row.real, unit: 'chars' },
    { name: `${row.kind}: estimate / real, uncalibrated`, value: row.estimate / row.real, unit: '×' },
    { name: `${row.kind}: learnt factor`, value: row.factor, unit: '×' },
    { name: `${row.kind}: calibrated error`, value: row.calibratedError * 100, unit: '%', target: 'within ±10%' },
  ]);
  return {
    name: 'token-calibration',
    metrics,
    notes: rows.map(
      (row) =>
        `${row.kind}: ${row.messages} messages, ${row.characters.toLocaleString('en-US')} chars, estimate ${row.estimate.toLocaleString('en-US')} vs real ${row.real.toLocaleString('en-US')} tokens (@anthropic-ai/tokenizer)`,
    ),
  };
}
