/**
 * The fake Anthropic's public face: the starter, the reply and request types tests script and
 * read, and the token counting and limits tests share with it.
 */
export { startFakeAnthropic } from './fake-anthropic.js';
export { errorBody } from './http.js';
export { refusalFor } from './limits.js';
export { characterTokenCounter, imageTokens, promptParts, promptText, scaledImageTokens } from './token-count.js';
export type {
  FakeAnthropic,
  FakeAnthropicOptions,
  FakeDelayReply,
  FakeErrorReply,
  FakeHangUpReply,
  FakeRawReply,
  FakeReply,
  FakeReplyFunction,
  FakeStreaming,
  FakeTextReply,
  FakeToolUseReply,
  RecordedRequest,
  RefusalForm,
} from './types.js';
