import path from 'node:path';
import { InputError } from '../common/errors.js';
import type { MemoryLocation, MemoryRecord } from '../memory/types.js';
import type { PersonaStore } from '../persona/persona-store.js';
import type { CommandDeps } from './channel-commands.js';

/** Replies to commands fit in one Discord message. */
const REPLY_LIMIT = 1900;
/** Memories read to find a user's own (a command, not a hot path). */
const SCAN_LIMIT = 10_000;

/** What `/memory mine` and `/persona` need of the runtime (`ChannelRuntime` has it). */
export interface UserCommandRuntime {
  authorOf(channelId: string, messageId: string): Promise<string | undefined>;
  systemPromptOf(channelId: string): string;
  readonly personas: PersonaStore;
}

export function hasUserCommands(runtime: unknown): runtime is UserCommandRuntime {
  const candidate = runtime as Partial<UserCommandRuntime> | null;
  return typeof candidate?.authorOf === 'function' && typeof candidate.systemPromptOf === 'function' && candidate.personas !== undefined;
}

/**
 * A memory belongs to a user when every source message it was drawn from (that history still
 * knows) is theirs. A memory drawn from a conversation of several people belongs to none of
 * them alone: listing it to one, or letting one delete it, would expose or erase the others'.
 */
export async function ownsMemory(runtime: UserCommandRuntime, record: MemoryRecord, userId: string): Promise<boolean> {
  const authors = (await Promise.all(record.sourceIds.map((id) => runtime.authorOf(record.channelId, id)))).filter((author) => author !== undefined);
  return authors.length > 0 && authors.every((author) => author === userId);
}

async function ownMemories(deps: CommandDeps, runtime: UserCommandRuntime, location: MemoryLocation, userId: string): Promise<MemoryRecord[]> {
  const records = await deps.memory.list({ location, kind: 'memory', limit: SCAN_LIMIT });
  const mine: MemoryRecord[] = [];
  for (const record of records) if (record.channelId === location.channelId && (await ownsMemory(runtime, record, userId))) mine.push(record);
  return mine;
}

/** `/memory mine`: what the bot remembers from the asking user's own messages here, with ids. */
export async function describeMyMemories(deps: CommandDeps, runtime: UserCommandRuntime, location: MemoryLocation, userId: string): Promise<string> {
  const mine = await ownMemories(deps, runtime, location, userId);
  if (mine.length === 0) {
    return 'I remember nothing drawn only from your messages in this channel. (Memories from conversations with others are not listed here.)';
  }
  const lines = [`What I remember from your messages here (${mine.length}); forget one with /memory forget id:<id>:`];
  for (const record of mine) {
    const line = `• ${record.id} [${record.memoryType ?? 'fact'}] ${clip(record.content.replace(/\s+/g, ' '), 200)}`;
    if (lines.join('\n').length + line.length + 40 > REPLY_LIMIT) {
      lines.push(`…and ${mine.length - lines.length + 1} more.`);
      break;
    }
    lines.push(line);
  }
  return lines.join('\n');
}

/** Whether the asking user may forget this memory without Manage Messages: it is theirs alone. */
export async function mayForgetOwn(deps: CommandDeps, runtime: UserCommandRuntime, location: MemoryLocation, userId: string, id: string): Promise<boolean> {
  const trimmed = id.trim();
  return (await ownMemories(deps, runtime, location, userId)).some((record) => record.id === trimmed);
}

/** `/persona` with nothing else: the prompt the channel's model gets now, and where it comes from. */
export function describePersona(runtime: UserCommandRuntime, channelId: string, configFile?: string): string {
  const persona = runtime.personas.get(channelId);
  const prompt = clip(runtime.systemPromptOf(channelId), 1600);
  return persona
    ? `This channel's persona (set with /persona by <@${persona.setBy}> on ${new Date(persona.setAt).toISOString().slice(0, 10)}):\n${prompt}`
    : `This channel uses the configured persona (${configFile ? `system_prompt in ${path.basename(configFile)}` : 'the built-in default; no config file'}):\n${prompt}`;
}

export async function setPersona(runtime: UserCommandRuntime, channelId: string, prompt: string, userId: string): Promise<string> {
  try {
    await runtime.personas.set(channelId, prompt, userId);
  } catch (error) {
    if (error instanceof InputError) return `Persona not changed: ${error.message}.`;
    throw error;
  }
  return 'Persona set for this channel; it applies from the next answer. /persona clear goes back to the configured one.';
}

export async function clearPersona(runtime: UserCommandRuntime, channelId: string): Promise<string> {
  return (await runtime.personas.clear(channelId))
    ? 'Persona cleared: this channel uses the configured persona again.'
    : 'This channel has no persona of its own; it uses the configured one.';
}

/** One line for `/context`. */
export function personaLine(runtime: UserCommandRuntime, channelId: string): string {
  const persona = runtime.personas.get(channelId);
  return persona ? `Persona: set with /persona by <@${persona.setBy}> (stored in the data directory)` : 'Persona: from config.toml';
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
