import { describe, expect, it } from "vitest";
import { append, EMPTY, fromWindow, lineAt, prepend, utf8Length } from "./logbuffer";

describe("a log held in windows", () => {
  it("splits a window into lines with their byte offsets", () => {
    const s = fromWindow(100, "ab\ncdé\n");
    expect(s.lines).toEqual(["ab", "cdé"]);
    expect(s.offsets).toEqual([100, 103]);
    expect([s.start, s.end, s.open]).toEqual([100, 108, false]);
  });

  it("goes on with a line being written when the next window comes", () => {
    let s = append(EMPTY, 0, "one\ntw");
    expect(s.lines).toEqual(["one", "tw"]);
    expect(s.open).toBe(true);
    s = append(s, s.end, "o\nthree\n");
    expect(s.lines).toEqual(["one", "two", "three"]);
    expect(s.offsets).toEqual([0, 4, 8]);
    expect(s.end).toBe(14);
  });

  it("starts again from a window that does not follow on", () => {
    const s = append(fromWindow(0, "a\nb\n"), 500, "z\n");
    expect(s.lines).toEqual(["z"]);
    expect(s.start).toBe(500);
  });

  it("adds earlier windows before what it holds", () => {
    let s = fromWindow(6, "c\nd\n");
    s = prepend(s, 2, "a\nb\n");
    expect(s.lines).toEqual(["a", "b", "c", "d"]);
    expect(s.offsets).toEqual([2, 4, 6, 8]);
    expect(prepend(s, 0, "zz\n")).toBe(s); // not the window just before: left alone
  });

  it("joins a window cut inside a long line to the line it held", () => {
    const s = prepend(fromWindow(4, "defg\nh\n"), 0, "abc ");
    expect(s.lines).toEqual(["abc defg", "h"]);
    expect(s.offsets).toEqual([0, 9]);
  });

  it("never holds more than its cap: the far end is let go", () => {
    let s = fromWindow(0, "1\n2\n3\n");
    s = append(s, s.end, "4\n5\n", 4);
    expect(s.lines).toEqual(["2", "3", "4", "5"]);
    expect(s.start).toBe(2);
    const back = prepend(fromWindow(4, "3\n4\n5\n"), 0, "1\n2\n", 3);
    expect(back.lines).toEqual(["1", "2", "3"]);
    expect([back.end, back.open]).toEqual([6, false]);
  });

  it("finds the line that holds a byte", () => {
    const s = fromWindow(10, "aa\nbbb\nc\n");
    expect(lineAt(s, 10)).toBe(0);
    expect(lineAt(s, 14)).toBe(1);
    expect(lineAt(s, 17)).toBe(2);
    expect(lineAt(s, 9)).toBe(-1);
    expect(lineAt(s, 19)).toBe(-1);
  });

  it("counts bytes as UTF-8 does", () => {
    expect(utf8Length("aé€😀")).toBe(1 + 2 + 3 + 4);
  });
});
