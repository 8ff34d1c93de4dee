import { EXIT, type CliCommand } from '../command.js';

export const chatCommand: CliCommand = {
  name: 'chat',
  summary: '(not available yet)',
  async run(_argv, io) {
    io.stderr.write('magpie chat is not available in this build yet.\n');
    return EXIT.failure;
  },
};
