/** Branches: the channel agent forks its live context to think about one question and gets back a conclusion. */
export { createBranchTool, MAX_QUESTION_LENGTH, type BranchToolOptions } from './branch-tool.js';
export { runBranch, type BranchOutcome, type BranchStatus, type RunBranchOptions } from './run-branch.js';
export { compactFork, forkRequest, forkTokens, type Fork } from './fork.js';
export { BRANCH_SYSTEM_PROMPT, BRANCH_CONTINUE_NOTE, BRANCH_QUESTION_PREFIX } from './branch-prompt.js';
