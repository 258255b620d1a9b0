// One AHP connection over WebSocket: JSON-RPC 2.0, one message per text frame. Requests get
// promises; notifications go to the listener. Nothing here is private to this host: any AHP
// client can send what the console sends.

export class Connection {
  constructor(url, onNotification, onClose) {
    this.url = url;
    this.nextId = 1;
    this.pending = new Map();
    this.onNotification = onNotification;
    this.onClose = onClose;
  }

  /** Open the socket; resolves once it is open, rejects if it never opens. */
  open() {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(this.url);
      this.ws = ws;
      let opened = false;
      ws.onopen = () => {
        opened = true;
        resolve();
      };
      ws.onmessage = (event) => this.receive(event.data);
      ws.onclose = (event) => {
        for (const { reject: fail } of this.pending.values()) fail(new Error("connection closed"));
        this.pending.clear();
        if (!opened) reject(new Error(`could not connect (${event.code})`));
        else this.onClose(event);
      };
    });
  }

  receive(text) {
    const arrived = performance.now();
    let message;
    try {
      message = JSON.parse(text);
    } catch {
      return;
    }
    if (message.method) {
      this.onNotification(message.method, message.params || {}, arrived);
      return;
    }
    const waiter = this.pending.get(message.id);
    if (!waiter) return;
    this.pending.delete(message.id);
    if (message.error) {
      const error = new Error(message.error.message || "request failed");
      error.code = message.error.code;
      error.data = message.error.data;
      waiter.reject(error);
    } else {
      waiter.resolve(message.result);
    }
  }

  request(method, params) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
        reject(new Error("not connected"));
        return;
      }
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    });
  }

  notify(method, params) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify({ jsonrpc: "2.0", method, params }));
    }
  }

  close() {
    if (this.ws) this.ws.close(1000, "console closed");
  }
}
