/**
 * Structured JSON logging: one object per line with time, level, message and context fields. The sink is
 * injectable so the CNI can log to a file (its stdout carries only the result) and tests can capture lines.
 */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export type LogFields = Record<string, unknown>;
export type LogSink = (line: string) => void;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
}

export interface LoggerOptions {
  readonly level?: LogLevel;
  readonly sink?: LogSink;
  readonly fields?: LogFields;
  readonly nowMs?: () => number;
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

function serialiseError(value: unknown): unknown {
  if (!(value instanceof Error)) return value;
  const out: Record<string, unknown> = { name: value.name, message: value.message };
  const code = (value as { code?: unknown }).code;
  if (code !== undefined) out['code'] = code;
  if (value.cause !== undefined) out['cause'] = serialiseError(value.cause);
  return out;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const minRank = RANK[options.level ?? 'info'];
  const sink = options.sink ?? ((line: string) => process.stderr.write(`${line}\n`));
  const now = options.nowMs ?? Date.now;
  const base = options.fields ?? {};
  const emit = (level: LogLevel, msg: string, fields?: LogFields): void => {
    if (RANK[level] < minRank) return;
    const record: Record<string, unknown> = { time: new Date(now()).toISOString(), level, msg, ...base };
    if (fields) for (const [k, v] of Object.entries(fields)) record[k] = serialiseError(v);
    sink(JSON.stringify(record));
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => createLogger({ ...options, fields: { ...base, ...fields } }),
  };
}

/** Discards everything; for callers that must pass a logger but have nowhere to write. */
export const silentLogger: Logger = createLogger({ sink: () => {} });
