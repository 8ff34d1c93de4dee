/**
 * Counting a request's prompt as a tokenizer would meet it: its text and tool traffic, CJK
 * characters, and images charged by their pixels as the real API charges them. Tests use it as
 * the "real" count that the bot's own estimate is checked against.
 */
import { sniffImage } from '../../../src/attachments/image-info.js';
import type { RecordedRequest } from './types.js';

/** The text a request puts before the model: system prompt, every block of every message, tool definitions. */
export function promptText(body: any): string {
  const { text, tools } = promptParts(body);
  return tools === '' ? text : `${text}\n${tools}`;
}

/**
 * A request's text in two parts, as a tokenizer meets them: the prose (system prompt, text
 * blocks, tool definitions) and the tool traffic (each call's name and input JSON, each result's
 * text). A result given as a list of blocks is read as the API reads it: its text blocks' text
 * (its images are charged by their pixels, see `imageTokens`), never the JSON of the list.
 */
export function promptParts(body: any): { text: string; tools: string } {
  const text: string[] = [];
  const tools: string[] = [];
  const system = body?.system;
  if (typeof system === 'string') text.push(system);
  else if (Array.isArray(system)) for (const block of system) text.push(String(block?.text ?? ''));
  for (const message of Array.isArray(body?.messages) ? body.messages : []) {
    if (typeof message?.content === 'string') {
      text.push(message.content);
      continue;
    }
    for (const block of Array.isArray(message?.content) ? message.content : []) {
      if (block?.type === 'text') text.push(String(block.text ?? ''));
      else if (block?.type === 'tool_use') tools.push(`${block.name ?? ''} ${JSON.stringify(block.input ?? {})}`);
      else if (block?.type === 'tool_result') tools.push(toolResultText(block.content));
    }
  }
  if (Array.isArray(body?.tools)) text.push(JSON.stringify(body.tools));
  return { text: text.join('\n'), tools: tools.join('\n') };
}

function toolResultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.filter((block) => block?.type === 'text').map((block) => String(block.text ?? '')).join('\n');
}

/**
 * A tokenizer stand-in: one token per CJK character (Han, kana, Hangul, full-width forms), one per
 * `charsPerToken` other characters (default 4, as Latin prose goes), plus `perMessage` for each
 * message's framing. Tool calls' input and tool results' text are counted at `toolCharsPerToken`
 * (default: as prose): JSON, logs and data rows are denser in tokens than prose, about 3 characters
 * a token for search results and records and 2 for log lines by Anthropic's published tokenizer
 * (`@anthropic-ai/tokenizer`). Images cost what the real API charges, about width × height / 750
 * after it scales them down (long edge at most 1,568 pixels, about 1.15 megapixels), never the
 * length of their base64 text, in a message or in a tool result; offering tools adds the tool-use
 * system prompt the API puts in front (`toolSystemTokens`: 346 with `auto` or `none`, 313 when a
 * tool is forced), besides the definitions' own text.
 */
export function characterTokenCounter(
  options: { charsPerToken?: number; toolCharsPerToken?: number; perMessage?: number; toolSystemTokens?: number; imageScale?: number } = {},
): (request: RecordedRequest) => number {
  // A server that charges images otherwise than their pixels say (how the bot copes is tested).
  const imageScale = options.imageScale ?? 1;
  const charsPerToken = options.charsPerToken ?? 4;
  const toolCharsPerToken = options.toolCharsPerToken ?? charsPerToken;
  const perMessage = options.perMessage ?? 3;
  return (request) => {
    const { text, tools: toolText } = promptParts(request.body);
    const messages = Array.isArray(request.body?.messages) ? request.body.messages.length : 0;
    const tools = Array.isArray(request.body?.tools) && request.body.tools.length > 0;
    const forced = request.body?.tool_choice?.type === 'any' || request.body?.tool_choice?.type === 'tool';
    const toolSystem = tools ? (options.toolSystemTokens ?? (forced ? 313 : 346)) : 0;
    return (
      scriptTokens(text, charsPerToken) +
      scriptTokens(toolText, toolCharsPerToken) +
      perMessage * messages +
      Math.round(imageScale * imageTokens(request.body)) +
      toolSystem
    );
  };
}

/** One token per CJK character, one per `charsPerToken` of the others. */
function scriptTokens(text: string, charsPerToken: number): number {
  let cjk = 0;
  let other = 0;
  for (const char of text) {
    if (/[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\u3000-\u303f]/.test(char)) cjk += 1;
    else other += 1;
  }
  return cjk + Math.ceil(other / charsPerToken);
}

/** What the real API charges for the images of a request. */
export function imageTokens(body: any): number {
  let total = 0;
  for (const message of Array.isArray(body?.messages) ? body.messages : []) {
    for (const block of imageBlocks(message?.content)) {
      const data = typeof block.source?.data === 'string' ? block.source.data : '';
      // The header is enough to know the size (a JPEG's frame header may come after its tables).
      const info = sniffImage(Buffer.from(data.slice(0, 87_384), 'base64'));
      total += info && info.width > 0 && info.height > 0 ? scaledImageTokens(info.width, info.height) : 1600;
    }
  }
  return total;
}

/** The image blocks of a message's content, those inside its tool results included. */
function imageBlocks(content: unknown): any[] {
  if (!Array.isArray(content)) return [];
  return content.flatMap((block) => (block?.type === 'image' ? [block] : block?.type === 'tool_result' ? imageBlocks(block.content) : []));
}

/** width × height / 750 of the image as the API resizes it. */
export function scaledImageTokens(width: number, height: number): number {
  const scale = Math.min(1, 1568 / Math.max(width, height), Math.sqrt(1_150_000 / (width * height)));
  return Math.ceil((Math.floor(width * scale) * Math.floor(height * scale)) / 750);
}
