import { EXIT, type CliCommand } from '../command.js';

export const startCommand: CliCommand = {
  name: 'start',
  summary: '(not available yet)',
  async run(_argv, io) {
    io.stderr.write('magpie start is not available in this build yet.\n');
    return EXIT.failure;
  },
};
