/**
 * What the cluster harness's scripted model plays (src/runtime/model/scripted-model.ts), chosen by a tag in
 * the user's input: a long stream, a slow bash job that leaves an owner marker, a bash call that asks for
 * permission, and a sub-agent (the `task` tool). Steps match the conversation, not a counter, so a run
 * resumed on another node picks the script up where the dead node left it.
 */

/** The file, in each session's directory, where bash jobs record who ran them and when. */
export const OWNER_MARKER = 'owners.marker'

/**
 * A job of ~0.7 s that appends `<node> <job> start|tick|end <ms>` lines as it runs: the node's name comes
 * from its commands' environment (HARNESS_NODE, a new name at each start), the job is a random token. The
 * lines of one job span the time it ran; two nodes' jobs of one session must never overlap in time.
 */
const JOB = [
  `n="$HARNESS_NODE"; j=$(date +%s%N)$RANDOM; m=${OWNER_MARKER}`,
  'echo "$n $j start $(date +%s%3N)" >> $m',
  'for i in 1 2 3 4 5 6 7; do sleep 0.1; echo "$n $j tick $(date +%s%3N)" >> $m; done',
  'echo "$n $j end $(date +%s%3N)" >> $m',
].join('; ')

const STORY =
  'Three nodes shared one log. Each session had one owner at a time, and the owner wrote under its epoch. ' +
  'When an owner fell silent, the others waited out its lease, claimed its sessions one by one and raised ' +
  'their epochs, so that nothing the silent one still held could land. They settled the calls it had cut ' +
  'off as interrupted, offered its questions again, and carried its runs on from the last word it wrote. ' +
  'The clients moved to the nodes that still answered and asked for everything after their cursors: every ' +
  'event once, in order, whichever node told them. '

export const SCENARIOS = ['#story', '#work', '#work', '#permit', '#delegate'] as const
export type Scenario = (typeof SCENARIOS)[number]

export const script = {
  chunkSize: 8,
  delayMs: 3,
  uniqueCallIds: true,
  steps: [
    {
      when: { userContains: '#child' },
      text: STORY.slice(0, 240),
    },
    {
      when: { userContains: '#story', afterToolResult: false },
      reasoning: 'A long story, streamed slowly, so that its node can die in the middle of it.',
      text: STORY.repeat(2),
    },
    {
      when: { userContains: '#work', afterToolResult: false },
      text: 'Running the job.',
      toolCalls: [{ name: 'bash', input: { command: JOB, description: 'the slow job' } }],
    },
    { when: { userContains: '#work', afterToolResult: true }, text: 'The job ran, or was cut off (see its result).' },
    {
      when: { userContains: '#permit', afterToolResult: false },
      text: 'This one needs your permission.',
      toolCalls: [{ name: 'bash', input: { command: 'touch ask.marker', description: 'asks first' } }],
    },
    { when: { userContains: '#permit', afterToolResult: true }, text: 'Done, or refused.' },
    {
      when: { userContains: '#delegate', afterToolResult: false },
      text: 'Handing this to a sub-agent.',
      toolCalls: [
        {
          name: 'task',
          input: { description: 'tell a story', prompt: '#child tell a short story', subagent_type: 'general' },
        },
      ],
    },
    { when: { userContains: '#delegate', afterToolResult: true }, text: 'The sub-agent is done.' },
    { when: {}, text: 'Noted.' },
  ],
}

/** The nodes' rules: bash and sub-agents run without asking, except `touch ask…`, which waits for a person. */
export const permission = [
  { permission: 'bash', pattern: '*', action: 'allow' },
  { permission: 'bash', pattern: 'touch ask*', action: 'ask' },
  { permission: 'task', pattern: '*', action: 'allow' },
] as const
