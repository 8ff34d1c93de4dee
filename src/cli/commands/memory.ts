import { EXIT, type CliCommand } from '../command.js';

export const memoryCommand: CliCommand = {
  name: 'memory',
  summary: '(not available yet)',
  async run(_argv, io) {
    io.stderr.write('magpie memory is not available in this build yet.\n');
    return EXIT.failure;
  },
};
