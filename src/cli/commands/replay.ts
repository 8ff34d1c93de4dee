import { EXIT, type CliCommand } from '../command.js';

export const replayCommand: CliCommand = {
  name: 'replay',
  summary: '(not available yet)',
  async run(_argv, io) {
    io.stderr.write('magpie replay is not available in this build yet.\n');
    return EXIT.failure;
  },
};
