// A collection of watched objects drawn as a virtualised table.
//
// Events arrive one by one, hundreds a second on a big cluster; the page must not redraw per
// event. A Collection applies each event to its map and only marks itself dirty; once per
// animation frame it sorts what it holds (a thousand keys sort in well under a millisecond)
// and the table draws the rows in view — a fixed pool of row elements, reused, whose cells are
// written only when their text changed. A table of 1,000 nodes therefore costs the same to
// draw as one of 30.

/** "default/web-1" for namespaced objects, "node1" otherwise. */
export function keyOf(obj) {
  const meta = obj.metadata || {};
  return meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name;
}

export class Collection {
  /**
   * @param {{sort?: (a: object, b: object) => number, limit?: number}} options
   *   limit: keep only the first `limit` objects of the sort order (the newest Events)
   */
  constructor({ sort, limit } = {}) {
    this.objects = new Map();
    this.sort = sort || ((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0));
    this.limit = limit;
    this.rows = [];
    this.listeners = [];
    this.scheduled = false;
  }

  reset(items) {
    this.objects = new Map(items.map((obj) => [keyOf(obj), obj]));
    this.#changed();
  }

  apply(type, obj) {
    if (type === "DELETED") this.objects.delete(keyOf(obj));
    else this.objects.set(keyOf(obj), obj);
    this.#changed();
  }

  get(key) {
    return this.objects.get(key);
  }

  get size() {
    return this.objects.size;
  }

  /** Call `listener(rows)` after each batch of changes, once per animation frame at most. */
  onChange(listener) {
    this.listeners.push(listener);
  }

  #changed() {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => {
      this.scheduled = false;
      let rows = [...this.objects.values()].sort(this.sort);
      if (this.limit && rows.length > this.limit) {
        const dropped = rows.slice(this.limit);
        rows = rows.slice(0, this.limit);
        for (const obj of dropped) this.objects.delete(keyOf(obj));
      }
      this.rows = rows;
      for (const listener of this.listeners) listener(rows);
    });
  }
}

export class VirtualTable {
  /**
   * @param {HTMLElement} root an element with a fixed height; the table fills it and scrolls
   * @param {{columns: {title: string, width: string, value: (obj: object) => string}[],
   *          onSelect?: (key: string) => void, rowHeight?: number}} options
   */
  constructor(root, { columns, onSelect, rowHeight = 24 }) {
    this.columns = columns;
    this.onSelect = onSelect;
    this.rowHeight = rowHeight;
    this.rows = [];
    this.selected = null;
    this.pool = [];
    this.drawPending = false;

    const template = columns.map((c) => c.width).join(" ");
    root.classList.add("vtable");
    root.style.setProperty("--columns", template);
    root.style.setProperty("--row-height", `${rowHeight}px`);
    const head = document.createElement("div");
    head.className = "vhead";
    for (const column of columns) {
      const cell = document.createElement("span");
      cell.textContent = column.title;
      head.append(cell);
    }
    this.scroller = document.createElement("div");
    this.scroller.className = "vscroll";
    this.spacer = document.createElement("div");
    this.spacer.className = "vspacer";
    this.scroller.append(this.spacer);
    root.append(head, this.scroller);

    this.scroller.addEventListener("scroll", () => this.schedule(), { passive: true });
    this.scroller.addEventListener("click", (e) => {
      const row = e.target.closest(".vrow");
      if (row && row.dataset.key && this.onSelect) this.onSelect(row.dataset.key);
    });
    new ResizeObserver(() => this.schedule()).observe(this.scroller);
  }

  setRows(rows) {
    this.rows = rows;
    this.schedule();
  }

  select(key) {
    this.selected = key;
    this.schedule();
  }

  /** Draw at the next animation frame (several calls in one frame draw once). */
  schedule() {
    if (this.drawPending) return;
    this.drawPending = true;
    requestAnimationFrame(() => {
      this.drawPending = false;
      this.draw();
    });
  }

  draw() {
    const { rowHeight, rows } = this;
    this.spacer.style.height = `${rows.length * rowHeight}px`;
    const first = Math.max(0, Math.floor(this.scroller.scrollTop / rowHeight) - 5);
    const visible = Math.ceil(this.scroller.clientHeight / rowHeight) + 10;
    const last = Math.min(rows.length, first + visible);
    while (this.pool.length < last - first) this.pool.push(this.#newRow());
    this.pool.forEach((row, slot) => {
      const index = first + slot;
      if (index >= last) {
        row.hidden = true;
        row.dataset.key = "";
        return;
      }
      const obj = rows[index];
      const key = keyOf(obj);
      row.hidden = false;
      row.style.transform = `translateY(${index * rowHeight}px)`;
      row.dataset.key = key;
      row.classList.toggle("selected", key === this.selected);
      this.columns.forEach((column, i) => {
        const text = column.value(obj);
        const cell = row.children[i];
        if (cell.textContent !== text) {
          cell.textContent = text;
          cell.title = text;
        }
      });
    });
  }

  #newRow() {
    const row = document.createElement("div");
    row.className = "vrow";
    for (let i = 0; i < this.columns.length; i++) row.append(document.createElement("span"));
    this.spacer.append(row);
    return row;
  }
}
