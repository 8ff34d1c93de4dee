/** Application wiring shared by `magpie start` and `magpie chat`. */
export { openApp, MODEL_HINT, type MagpieApp, type OpenAppOptions } from './open-app.js';
export { ChannelResponder, APOLOGY_REPLY, type ReplyTarget, type TurnOutcome, type TurnRequest } from './channel-responder.js';
export {
  describeContext,
  startCompaction,
  searchMemory,
  forgetMemory,
  listTasks,
  cancelTask,
  type CommandDeps,
  type TaskControl,
} from './channel-commands.js';
export { DailyTokenBudget, UserRateLimiter } from './cost-guards.js';
