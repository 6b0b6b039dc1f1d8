// A chat on the AI SDK's framework-free Chat (AbstractChat, which useChat wraps), talking to
// `cleveractors serve` over POST /ai-sdk with the default transport: no adapter code.
import { AbstractChat, DefaultChatTransport } from "ai";

// What the framework bindings give AbstractChat: a state that tells us when it changes.
class RenderedState {
  constructor(onChange) {
    this.onChange = onChange;
    this.messages = [];
    this._status = "ready";
    this.error = undefined;
  }
  get status() {
    return this._status;
  }
  set status(status) {
    this._status = status;
    this.onChange();
  }
  pushMessage = (message) => {
    this.messages = [...this.messages, message];
    this.onChange();
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
    this.onChange();
  };
  replaceMessage = (index, message) => {
    this.messages = this.messages.map((each, n) => (n === index ? structuredClone(message) : each));
    this.onChange();
  };
  snapshot = (thing) => structuredClone(thing);
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new RenderedState(() => render(this)) });
  }
}

const chat = new Chat({ transport: new DefaultChatTransport({ api: "/ai-sdk" }) });

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function toolPart(part) {
  const box = element("div", "tool", `${part.type.slice(5)}(${JSON.stringify(part.input ?? {})})`);
  if (part.state === "output-available") box.append(` → ${part.output}`);
  if (part.state === "output-error") box.append(` failed: ${part.errorText}`);
  if (part.state === "output-denied") box.append(" declined");
  if (part.state === "approval-requested") {
    for (const approved of [true, false]) {
      const button = element("button", "", approved ? "Approve" : "Decline");
      button.onclick = async () => {
        await chat.addToolApprovalResponse({ id: part.approval.id, approved });
        await chat.sendMessage(); // resumes the paused run on the server
      };
      box.append(" ", button);
    }
  }
  return box;
}

function render(chat) {
  const list = document.getElementById("messages");
  list.replaceChildren();
  for (const message of chat.messages) {
    const row = element("div", `message ${message.role}`);
    for (const part of message.parts) {
      if (part.type === "text") row.append(element("div", "", part.text));
      if (part.type.startsWith("tool-")) row.append(toolPart(part));
    }
    const usage = message.metadata?.usage;
    if (usage) {
      const cost = message.metadata.cost_usd ? `, $${message.metadata.cost_usd}` : "";
      row.append(element("div", "usage", `${usage.total_tokens} tokens${cost}`));
    }
    list.append(row);
  }
  document.getElementById("send").disabled = chat.status !== "ready" && chat.status !== "error";
}

document.getElementById("ask").onsubmit = (event) => {
  event.preventDefault();
  const input = document.getElementById("text");
  if (input.value.trim()) chat.sendMessage({ text: input.value });
  input.value = "";
};
document.getElementById("stop").onclick = () => chat.stop();
