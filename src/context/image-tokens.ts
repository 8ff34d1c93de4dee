/**
 * The provider's published rule for what an image costs: about width × height / 750 tokens.
 * Images whose long edge passes 1,568 pixels (or that exceed about 1.15 megapixels) are scaled
 * down before the model sees them, so no image costs more than about 1,600 tokens; that is the
 * cap, and also what an image of unknown size is counted as.
 */
export const PIXELS_PER_TOKEN = 750;
export const IMAGE_TOKEN_CAP = 1600;

export function estimateImageTokens(width: number, height: number): number {
  if (!Number.isFinite(width) || !Number.isFinite(height) || width <= 0 || height <= 0) return IMAGE_TOKEN_CAP;
  return Math.min(IMAGE_TOKEN_CAP, Math.max(1, Math.ceil((width * height) / PIXELS_PER_TOKEN)));
}
