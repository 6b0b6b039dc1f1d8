// The frontend protocols' own clients, driven as a frontend drives them, against a cleveractors
// server: the `ai` package's framework-free chat (AbstractChat, the class useChat wraps) with its
// DefaultChatTransport, and @ag-ui/client's HttpAgent. Each command prints one JSON document:
// what the client ends up holding (its messages, status, errors and the events it saw), and,
// for a typed actor, every version of the object it held as it streamed (`outputs`).
//
//   node clients.mjs ai-sdk  BASE_URL MESSAGE [--stop-after-words N] [--approve yes|no]
//   node clients.mjs ag-ui   BASE_URL MESSAGE [--stop-after-words N] [--approve yes|no|edit:JSON]

import { AbstractChat, DefaultChatTransport } from "ai";
import { HttpAgent } from "@ag-ui/client";

const [command, baseUrl, message, ...rest] = process.argv.slice(2);
const options = {};
for (let i = 0; i < rest.length; i += 2) options[rest[i].replace(/^--/, "")] = rest[i + 1];
const stopAfterWords = options["stop-after-words"] ? Number(options["stop-after-words"]) : null;
const headers = process.env.CLEVERACTORS_TEST_API_KEY
  ? { Authorization: `Bearer ${process.env.CLEVERACTORS_TEST_API_KEY}` }
  : {};

const words = (text) => text.split(/\s+/).filter(Boolean).length;

// What the framework bindings (@ai-sdk/react, vue, svelte) give AbstractChat: a plain state.
class PlainChatState {
  constructor(messages = []) {
    this.messages = messages;
    this.status = "ready";
    this.error = undefined;
  }
  pushMessage = (message) => {
    this.messages = this.messages.concat(message);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index, message) => {
    this.messages = [
      ...this.messages.slice(0, index),
      this.snapshot(message),
      ...this.messages.slice(index + 1),
    ];
  };
  snapshot = (thing) => structuredClone(thing);
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new PlainChatState(init.messages) });
  }
  get chatState() {
    return this.state;
  }
}

// The text the assistant wrote after its last tool output: "the answer", once tools ran.
function answerWordsAfterTools(chatMessages) {
  const last = chatMessages[chatMessages.length - 1];
  if (!last || last.role !== "assistant") return 0;
  const afterTool = last.parts.findLastIndex((part) => part.state === "output-available");
  if (afterTool === -1) return 0;
  return words(
    last.parts
      .slice(afterTool + 1)
      .filter((part) => part.type === "text")
      .map((part) => part.text)
      .join(" "),
  );
}

async function aiSdk() {
  const finishes = [];
  const errors = [];
  const outputs = [];
  const chat = new Chat({
    id: options.chat ?? "robot-chat",
    transport: new DefaultChatTransport({ api: `${baseUrl}/ai-sdk`, headers }),
    onFinish: ({ message: finished, isAbort }) =>
      finishes.push({ metadata: finished.metadata ?? null, isAbort: Boolean(isAbort) }),
    onError: (error) => errors.push(error.message),
    // Each data part as it arrives; the message then holds one part per id, replaced in place.
    onData: (part) => {
      if (part.type === "data-output") outputs.push(structuredClone(part));
    },
  });
  let watcher = null;
  if (stopAfterWords !== null) {
    watcher = setInterval(() => {
      if (answerWordsAfterTools(chat.messages) >= stopAfterWords) {
        clearInterval(watcher);
        chat.stop();
      }
    }, 5);
  }
  await chat.sendMessage({ text: message });
  if (watcher) clearInterval(watcher);
  const rounds = [snapshotOf(chat, finishes, errors, outputs)];
  if (options.approve) {
    const pending = chat.messages
      .flatMap((each) => each.parts)
      .filter((part) => part.state === "approval-requested");
    for (const part of pending) {
      await chat.addToolApprovalResponse({
        id: part.approval.id,
        approved: options.approve === "yes",
        reason: options.approve === "yes" ? undefined : "not today",
      });
    }
    await chat.sendMessage();
    rounds.push(snapshotOf(chat, finishes, errors, outputs));
  }
  return { rounds };
}

function snapshotOf(chat, finishes, errors, outputs) {
  return {
    outputs: structuredClone(outputs),
    status: chat.status,
    error: chat.error ? chat.error.message : null,
    errors: [...errors],
    messages: structuredClone(chat.messages),
    finishes: structuredClone(finishes),
  };
}

async function agUi() {
  const agent = new HttpAgent({ url: `${baseUrl}/ag-ui`, headers, threadId: options.thread ?? "robot-thread" });
  agent.addMessage({ id: "user-1", role: "user", content: message });
  const rounds = [await runOnce(agent, {})];
  if (options.approve) {
    const resume = agent.pendingInterrupts.map((interrupt) => ({
      interruptId: interrupt.id,
      status: "resolved",
      payload: answerTo(options.approve),
    }));
    rounds.push(await runOnce(agent, { resume }));
  }
  return { rounds };
}

function answerTo(approve) {
  if (approve.startsWith("edit:")) return { approved: true, editedArgs: JSON.parse(approve.slice(5)) };
  return approve === "yes" ? { approved: true } : { approved: false, reason: "not today" };
}

async function runOnce(agent, parameters) {
  const events = [];
  const states = [];
  let toolResults = 0;
  let answerWords = 0;
  const subscriber = {
    onEvent: ({ event }) => {
      events.push(event);
      if (event.type === "TOOL_CALL_RESULT") toolResults += 1;
      if (event.type === "TEXT_MESSAGE_CONTENT" && toolResults > 0 && stopAfterWords !== null) {
        answerWords += words(event.delta);
        if (answerWords >= stopAfterWords) agent.abortRun();
      }
    },
    // The agent's state after each STATE_SNAPSHOT or STATE_DELTA it applied.
    onStateChanged: ({ state }) => states.push(structuredClone(state)),
  };
  let error = null;
  try {
    await agent.runAgent(parameters, subscriber);
  } catch (caught) {
    error = caught.message;
  }
  return {
    error,
    events: structuredClone(events),
    states,
    state: structuredClone(agent.state),
    messages: structuredClone(agent.messages),
    pendingInterrupts: structuredClone(agent.pendingInterrupts ?? []),
  };
}

const commands = { "ai-sdk": aiSdk, "ag-ui": agUi };
if (!commands[command]) {
  console.error(`unknown command ${command}; one of ${Object.keys(commands).join(", ")}`);
  process.exit(2);
}
const held = await commands[command]();
process.stdout.write(JSON.stringify(held) + "\n");
