import { EXIT, type CliCommand } from '../command.js';

export const configCommand: CliCommand = {
  name: 'config',
  summary: '(not available yet)',
  async run(_argv, io) {
    io.stderr.write('magpie config is not available in this build yet.\n');
    return EXIT.failure;
  },
};
