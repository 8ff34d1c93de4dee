import {
  ApplicationCommandOptionType,
  MessageFlags,
  PermissionFlagsBits,
  type ChatInputCommandInteraction,
  type Client,
  type RESTPostAPIChatInputApplicationCommandsJSONBody,
} from 'discord.js';
import {
  cancelTask,
  describeContext,
  forgetMemory,
  listTasks,
  searchMemory,
  startCompaction,
  type CommandDeps,
} from '../app/channel-commands.js';
import {
  clearPersona,
  describeMyMemories,
  describePersona,
  hasUserCommands,
  mayForgetOwn,
  personaLine,
  setPersona,
} from '../app/user-commands.js';
import { errorMessage, InputError } from '../common/errors.js';
import { MAX_PERSONA_CHARS } from '../persona/persona-store.js';
import { forgetMe } from '../app/forget-me.js';
import type { MemoryLocation } from '../memory/types.js';

const MANAGE_MESSAGES = PermissionFlagsBits.ManageMessages.toString();

/** The slash commands Magpie registers. `/compact` is hidden from members without Manage Messages. */
export const SLASH_COMMANDS: RESTPostAPIChatInputApplicationCommandsJSONBody[] = [
  { name: 'context', description: 'How full this channel’s context window is, and the last compaction' },
  {
    name: 'compact',
    description: 'Compact this channel’s history now, in the background',
    default_member_permissions: MANAGE_MESSAGES,
  },
  {
    name: 'memory',
    description: 'Search or forget what Magpie remembers in this channel',
    options: [
      {
        type: ApplicationCommandOptionType.Subcommand,
        name: 'search',
        description: 'Search memories and past messages',
        options: [{ type: ApplicationCommandOptionType.String, name: 'query', description: 'What to look for', required: true }],
      },
      {
        type: ApplicationCommandOptionType.Subcommand,
        name: 'mine',
        description: 'What Magpie remembers from your own messages in this channel (only you see it)',
      },
      {
        type: ApplicationCommandOptionType.Subcommand,
        name: 'forget',
        description: 'Forget one memory (one of yours, or any with Manage Messages)',
        options: [{ type: ApplicationCommandOptionType.String, name: 'id', description: 'Memory id from /memory search', required: true }],
      },
      {
        type: ApplicationCommandOptionType.Subcommand,
        name: 'forget-me',
        description: 'Erase everything you wrote, in every channel (asks for a confirmation code first)',
        options: [{ type: ApplicationCommandOptionType.String, name: 'code', description: 'The code from the first call', required: false }],
      },
    ],
  },
  {
    name: 'persona',
    description: 'Show or change who Magpie is in this channel',
    options: [
      { type: ApplicationCommandOptionType.Subcommand, name: 'show', description: 'Show this channel’s persona' },
      {
        type: ApplicationCommandOptionType.Subcommand,
        name: 'set',
        description: 'Give this channel its own persona (needs Manage Channels)',
        options: [
          {
            type: ApplicationCommandOptionType.String,
            name: 'text',
            description: 'Who Magpie should be here, as instructions',
            required: true,
            max_length: MAX_PERSONA_CHARS,
          },
        ],
      },
      { type: ApplicationCommandOptionType.Subcommand, name: 'clear', description: 'Go back to the configured persona (needs Manage Channels)' },
    ],
  },
  {
    name: 'tasks',
    description: 'Background workers running in this channel',
    options: [
      { type: ApplicationCommandOptionType.Subcommand, name: 'list', description: 'List the running workers' },
      {
        type: ApplicationCommandOptionType.Subcommand,
        name: 'cancel',
        description: 'Stop one worker (needs Manage Messages)',
        options: [{ type: ApplicationCommandOptionType.String, name: 'id', description: 'Worker id from /tasks list', required: true }],
      },
    ],
  },
];

/**
 * Registers the commands: per guild when the operator limits the bot to some guilds (they
 * appear at once), globally otherwise.
 */
export async function registerCommands(client: Client<true>, options: { guildIds: readonly string[] }): Promise<void> {
  if (options.guildIds.length === 0) {
    await client.application.commands.set(SLASH_COMMANDS);
    return;
  }
  for (const guildId of options.guildIds) await client.application.commands.set(SLASH_COMMANDS, guildId);
}

/**
 * Answers one slash command, ephemerally. Permissions are checked here as well as through
 * `default_member_permissions`, which server admins can override.
 */
export async function handleSlashCommand(
  interaction: ChatInputCommandInteraction,
  deps: CommandDeps,
  location: MemoryLocation,
): Promise<void> {
  // Discord drops an interaction not answered within 3 s ("The application did not respond"),
  // even when the work (an erasure, a search on a slow store) then succeeds: past DEFER_AFTER_MS
  // the answer is promised ("thinking…") and later written into that promise.
  let deferral: Promise<boolean> | undefined;
  const timer = setTimeout(() => {
    deferral = interaction.deferReply({ flags: MessageFlags.Ephemeral }).then(
      () => true,
      (error: unknown) => {
        deps.events.emit({ type: 'slash_command_failed', channel_id: location.channelId, command: interaction.commandName, error: errorMessage(error) });
        return false;
      },
    );
  }, DEFER_AFTER_MS);
  const reply = async (content: string): Promise<unknown> => {
    clearTimeout(timer);
    if (deferral && (await deferral)) return interaction.editReply({ content, allowedMentions: { parse: [] } });
    return interaction.reply({ content, flags: MessageFlags.Ephemeral, allowedMentions: { parse: [] } });
  };
  try {
    await answerCommand(interaction, deps, location, reply);
  } catch (error) {
    // Unanswered, Discord shows the user "The application did not respond" and nothing else.
    deps.events.emit({
      type: 'slash_command_failed',
      channel_id: location.channelId,
      command: interaction.commandName,
      error: errorMessage(error),
    });
    if (interaction.replied) return;
    const text =
      error instanceof InputError ? `That did not work: ${clip(error.message, 300)}` : 'That did not work just now; please try again in a moment.';
    await reply(text);
  } finally {
    clearTimeout(timer);
  }
}

/** Well inside Discord's 3 s, with room for the deferral's own round trip. */
const DEFER_AFTER_MS = 2_000;

async function answerCommand(
  interaction: ChatInputCommandInteraction,
  deps: CommandDeps,
  location: MemoryLocation,
  reply: (content: string) => Promise<unknown>,
): Promise<void> {
  // In a DM the user is the only member; in a guild the permission is the member's.
  const canManage = interaction.inGuild() ? (interaction.memberPermissions?.has(PermissionFlagsBits.ManageMessages) ?? false) : true;
  const canManageChannel = interaction.inGuild() ? (interaction.memberPermissions?.has(PermissionFlagsBits.ManageChannels) ?? false) : true;
  const userRuntime = hasUserCommands(deps.runtime) ? deps.runtime : undefined;
  const userId = interaction.user.id;
  switch (interaction.commandName) {
    case 'context': {
      const persona = userRuntime ? `\n${personaLine(userRuntime, location.channelId)}` : '';
      await reply(describeContext(await deps.runtime.status(location.channelId)) + persona);
      return;
    }
    case 'persona': {
      if (!userRuntime) {
        await reply('Personas are not available here.');
        return;
      }
      const subcommand = interaction.options.getSubcommand(false) ?? 'show';
      if (subcommand === 'show') {
        await reply(describePersona(userRuntime, location.channelId, deps.configFile));
        return;
      }
      if (!canManageChannel) {
        await reply('You need the Manage Channels permission to change this channel’s persona.');
        return;
      }
      if (subcommand === 'set') {
        await reply(await setPersona(userRuntime, location.channelId, interaction.options.getString('text', true), userId));
        deps.events.emit({ type: 'persona_changed', channel_id: location.channelId, user_id: userId, action: 'set' });
        return;
      }
      if (subcommand === 'clear') {
        await reply(await clearPersona(userRuntime, location.channelId));
        deps.events.emit({ type: 'persona_changed', channel_id: location.channelId, user_id: userId, action: 'clear' });
        return;
      }
      await reply('Use /persona show, /persona set or /persona clear.');
      return;
    }
    case 'compact':
      if (!canManage) {
        await reply('You need the Manage Messages permission to compact this channel.');
        return;
      }
      await reply(await startCompaction(deps, location.channelId));
      return;
    case 'memory': {
      const subcommand = interaction.options.getSubcommand(false);
      if (subcommand === 'search') {
        await reply(await searchMemory(deps, location, interaction.options.getString('query', true)));
        return;
      }
      if (subcommand === 'mine') {
        if (!userRuntime) {
          await reply('That is not available here.');
          return;
        }
        await reply(await describeMyMemories(deps, userRuntime, location, userId));
        return;
      }
      if (subcommand === 'forget') {
        const id = interaction.options.getString('id', true);
        // A user may always forget what was drawn from their own messages alone.
        const own = userRuntime !== undefined && (await mayForgetOwn(deps, userRuntime, location, userId, id));
        if (!canManage && !own) {
          await reply('You need the Manage Messages permission to forget memories that are not yours alone (see /memory mine).');
          return;
        }
        await reply(await forgetMemory(deps, location, interaction.options.getString('id', true)));
        return;
      }
      if (subcommand === 'forget-me') {
        const runtime = deps.runtime;
        if (!deps.confirmations || !runtime.forgetUser) {
          await reply('Erasing is not available here.');
          return;
        }
        const erasure = { runtime: { forgetUser: runtime.forgetUser.bind(runtime) }, confirmations: deps.confirmations };
        await reply(await forgetMe(erasure, interaction.user.id, interaction.options.getString('code', false)));
        return;
      }
      await reply('Use /memory search, /memory mine, /memory forget or /memory forget-me.');
      return;
    }
    case 'tasks': {
      if (interaction.options.getSubcommand(false) === 'cancel') {
        if (!canManage) {
          await reply('You need the Manage Messages permission to cancel a worker.');
          return;
        }
        await reply(cancelTask(deps, location.channelId, interaction.options.getString('id', true), interaction.user.username));
        return;
      }
      await reply(await listTasks(deps, location.channelId));
      return;
    }
    default:
      await reply(`I do not know the command /${interaction.commandName}.`);
  }
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
