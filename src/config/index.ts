/** The config folder's public face: load, validate, watch, and the typed shape. */
export type * from './types.js';
export { DEFAULTS, DEFAULT_SYSTEM_PROMPT } from './defaults.js';
export { LiveConfig, type ConfigListener } from './live-config.js';
export { ConfigError, formatProblem, type ConfigProblem } from './problems.js';
export {
  DATA_DIR_ENV,
  DEFAULT_CONFIG_FILE,
  checkConfigText,
  defaultConfig,
  loadConfig,
  loadConfigFile,
  parseConfigText,
  type ConfigCheck,
  type LoadConfigFileOptions,
  type LoadConfigOptions,
  type LoadedConfig,
  type ParseConfigOptions,
} from './load-config.js';
export {
  ConfigWatcher,
  watchConfigFile,
  type ConfigWatcherLogger,
  type ConfigWatcherOptions,
  type ReloadOutcome,
} from './config-watcher.js';
export { describeChange, diffConfig, type ConfigChange } from './diff-config.js';
