// A small Dockerfile reader: stages and the instructions the repository's Dockerfile uses. Pure,
// so a unit test can hold the image we assemble without Docker (operator-image.ts) to exactly
// what the Dockerfile says.

export interface Instruction {
  keyword: string;
  /** The rest of the line, continuations joined. */
  args: string;
  line: number;
}

export interface Stage {
  base: string;
  name: string | undefined;
  instructions: Instruction[];
}

/** Splits a Dockerfile into stages; comments, parser directives and blank lines are dropped. */
export function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let line = lines[i] ?? '';
    if (/^\s*(#|$)/.test(line)) continue;
    while (/\\\s*$/.test(line) && i + 1 < lines.length) {
      i++;
      const next = lines[i] ?? '';
      if (/^\s*#/.test(next)) continue; // comment lines inside a continuation are skipped
      line = line.replace(/\\\s*$/, ' ') + next.trim();
    }
    const match = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!match?.[1]) throw new Error(`Dockerfile line ${start + 1}: cannot read '${line.trim()}'`);
    const keyword = match[1].toUpperCase();
    const args = (match[2] ?? '').trim();
    if (keyword === 'FROM') {
      const from = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (!from?.[1]) throw new Error(`Dockerfile line ${start + 1}: cannot read FROM '${args}'`);
      stages.push({ base: from[1], name: from[2], instructions: [] });
      continue;
    }
    const stage = stages.at(-1);
    if (!stage) throw new Error(`Dockerfile line ${start + 1}: ${keyword} before the first FROM`);
    stage.instructions.push({ keyword, args, line: start + 1 });
  }
  return stages;
}

/** A JSON-form (exec form) argument list, as ENTRYPOINT and CMD should be written. */
export function execForm(instruction: Instruction): string[] {
  const parsed: unknown = JSON.parse(instruction.args);
  if (!Array.isArray(parsed) || !parsed.every((part) => typeof part === 'string')) {
    throw new Error(
      `Dockerfile line ${instruction.line}: ${instruction.keyword} must be a JSON list of strings`,
    );
  }
  return parsed;
}

export interface Copy {
  from: string | undefined;
  sources: string[];
  destination: string;
}

export function copyArgs(instruction: Instruction): Copy {
  const words = instruction.args.split(/\s+/);
  let from: string | undefined;
  while (words[0]?.startsWith('--')) {
    const flag = words.shift() ?? '';
    const fromFlag = /^--from=(.+)$/.exec(flag);
    if (!fromFlag?.[1])
      throw new Error(`Dockerfile line ${instruction.line}: COPY flag ${flag} is not supported here`);
    from = fromFlag[1];
  }
  const destination = words.pop();
  if (!destination || words.length === 0)
    throw new Error(`Dockerfile line ${instruction.line}: COPY needs a source and a destination`);
  return { from, sources: words, destination };
}

/** ENV key=value pairs (the only ENV form used here; values without spaces or quotes). */
export function envPairs(instruction: Instruction): string[] {
  const pairs = instruction.args.split(/\s+/);
  for (const pair of pairs) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*=[^"'\s]*$/.test(pair)) {
      throw new Error(`Dockerfile line ${instruction.line}: ENV '${pair}' is not KEY=value`);
    }
  }
  return pairs;
}

/** What the final stage makes of its base image's config: the image config a runtime sees. */
export interface FinalStageConfig {
  base: string;
  workingDir: string | undefined;
  env: string[];
  user: string | undefined;
  exposedPorts: number[];
  entrypoint: string[];
  cmd: string[] | undefined;
  copies: Copy[];
}

const FINAL_STAGE_KEYWORDS = new Set(['WORKDIR', 'ENV', 'COPY', 'USER', 'EXPOSE', 'ENTRYPOINT', 'CMD']);

export function finalStageConfig(stages: Stage[]): FinalStageConfig {
  const stage = stages.at(-1);
  if (!stage) throw new Error('Dockerfile: no FROM');
  const config: FinalStageConfig = {
    base: stage.base,
    workingDir: undefined,
    env: [],
    user: undefined,
    exposedPorts: [],
    entrypoint: [],
    cmd: undefined,
    copies: [],
  };
  for (const instruction of stage.instructions) {
    if (!FINAL_STAGE_KEYWORDS.has(instruction.keyword)) {
      // A RUN in the final stage would change the image in ways we cannot reproduce without Docker.
      throw new Error(
        `Dockerfile line ${instruction.line}: ${instruction.keyword} in the final stage is not reproduced by test/e2e/realnode/operator-image.ts; teach it first`,
      );
    }
    switch (instruction.keyword) {
      case 'WORKDIR':
        config.workingDir = instruction.args;
        break;
      case 'ENV':
        config.env.push(...envPairs(instruction));
        break;
      case 'COPY':
        config.copies.push(copyArgs(instruction));
        break;
      case 'USER':
        config.user = instruction.args;
        break;
      case 'EXPOSE':
        config.exposedPorts.push(
          ...instruction.args.split(/\s+/).map((port) => Number(port.replace(/\/tcp$/, ''))),
        );
        break;
      case 'ENTRYPOINT':
        config.entrypoint = execForm(instruction);
        break;
      case 'CMD':
        config.cmd = execForm(instruction);
        break;
    }
  }
  return config;
}
