import { errorMessage } from '../../common/errors.js';
import type { MemoryKind, MemoryType } from '../../memory/types.js';
import { checkMemoryType } from '../../memory/validation.js';
import { UsageError } from '../parse-flags.js';

/** Flags every `magpie memory` subcommand takes: where the data is and which config to read. */
export const COMMON_OPTIONS = {
  'data-dir': { type: 'string' },
  config: { type: 'string' },
} as const;

/** `--kind`: memory or transcript. */
export function kindFlag(value: string | undefined, usage: string): MemoryKind | undefined {
  if (value === undefined) return undefined;
  if (value !== 'memory' && value !== 'transcript') throw new UsageError(`--kind must be memory or transcript, got '${value}'`, usage);
  return value;
}

/** `--type`: one of the memory types. */
export function typeFlag(value: string | undefined, usage: string): MemoryType | undefined {
  if (value === undefined) return undefined;
  try {
    return checkMemoryType(value, '--type');
  } catch (error) {
    throw new UsageError(errorMessage(error), usage);
  }
}
