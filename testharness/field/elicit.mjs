// Human approval for a 2025-11-25 client (issue 41): the official client, with an
// elicitation handler, calls a tool the gateway's approvals entry covers. The gateway asks
// on the call's own stream (elicitation/create, an id of its own); the handler's answer
// decides: accept runs the tool, decline and cancel are refused and run nothing. A client
// that declared no elicitation capability is refused APPROVAL_REQUIRED at once.
// Env: GATEWAY_URL, TOOL (default echo), ARGS (JSON, default {"message":"hi"}).
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { connect, text, check, run } from './lib.mjs';

const code = (res) => res?._meta?.['dev.stategate/error']?.code;

run(async () => {
  const tool = process.env.TOOL ?? 'echo';
  const args = JSON.parse(process.env.ARGS ?? '{"message":"hi"}');
  const asked = [];
  let answer = 'accept';
  const { client } = await connect({ capabilities: { elicitation: { form: {} } } });
  client.setRequestHandler(ElicitRequestSchema, async (req, extra) => {
    asked.push({ params: req.params, id: extra.requestId });
    switch (answer) {
      case 'accept': return { action: 'accept', content: { approve: true } };
      case 'accept-no': return { action: 'accept', content: { approve: false } };
      default: return { action: answer };
    }
  });

  let res = await client.callTool({ name: tool, arguments: args });
  check(!res.isError && code(res) === undefined, 'accept: ' + tool + ' ran', res);
  console.log('result: ' + text(res));
  const q = asked[0];
  check(asked.length === 1 && String(q?.id).startsWith('dev.stategate/approval:'), 'asked once, with the gateway\'s own request id', asked);
  check(q.params.message.includes('Tool: ' + tool) && q.params.message.includes('Arguments: '),
    'the question names the tool and its arguments', q.params.message);
  check(q.params.requestedSchema?.properties?.approve?.type === 'boolean', 'the form asks for one boolean', q.params.requestedSchema);
  console.log('question: ' + JSON.stringify(q.params.message));

  for (const [a, want] of [['decline', 'APPROVAL_DECLINED'], ['cancel', 'APPROVAL_CANCELLED'], ['accept-no', 'APPROVAL_DECLINED']]) {
    answer = a;
    res = await client.callTool({ name: tool, arguments: args });
    check(res.isError === true && code(res) === want, a + ': refused ' + want, res);
  }
  check(asked.length === 4, 'asked once per call', asked.length);

  const { client: plain } = await connect({ name: 'no-elicitation' });
  res = await plain.callTool({ name: tool, arguments: args });
  check(res.isError === true && code(res) === 'APPROVAL_REQUIRED' && text(res).includes('elicitation capability'),
    'a client without the elicitation capability: APPROVAL_REQUIRED', res);
  await client.close();
  await plain.close();
});
