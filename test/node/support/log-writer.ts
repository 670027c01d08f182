/**
 * A plugin process's log as the rotation test drives it: `log-writer.ts <file> <maxBytes> <keep> <tag> <lines>`
 * writes `lines` numbered lines through the plugin's own file logger.
 */
import { fileLogger } from '../../../node/plugin/context.js';

const [file, maxBytes, keep, tag, lines] = process.argv.slice(2);
const log = fileLogger({
  logFile: file ?? '',
  logLevel: 'info',
  logMaxBytes: Number(maxBytes),
  logKeepFiles: Number(keep),
});
for (let i = 0; i < Number(lines); i++) log.info('line', { tag, i, pad: 'x'.repeat(60) });
