import { describe, expect, it } from "vitest";
import { absolute, dayStart, duration, relative } from "./time";

describe("relative", () => {
  const now = 1_800_000_000_000;
  it("says how long ago, in the largest whole unit", () => {
    expect(relative(now - 400, now)).toBe("just now");
    expect(relative(now - 12_000, now)).toBe("12 s ago");
    expect(relative(now - 3 * 60_000 - 5_000, now)).toBe("3 min ago");
    expect(relative(now - 5 * 3_600_000, now)).toBe("5 h ago");
    expect(relative(now - 3 * 86_400_000, now)).toBe("3 d ago");
  });
  it("says how long until a time to come", () => {
    expect(relative(now + 2 * 3_600_000 + 10, now)).toBe("in 2 h");
  });
});

describe("absolute", () => {
  it("is the local date and time with its offset from UTC", () => {
    const text = absolute(Date.UTC(2026, 2, 2, 14, 5, 31));
    expect(text).toMatch(/^2026-03-0[12] \d\d:\d\d:31 UTC[+-]\d\d:\d\d$/);
  });
});

describe("duration", () => {
  it("reads at a glance", () => {
    expect(duration(0)).toBe("0 s");
    expect(duration(45_400)).toBe("45 s");
    expect(duration(185_000)).toBe("3 min 05 s");
    expect(duration(2 * 3_600_000 + 7 * 60_000)).toBe("2 h 07 min");
    expect(duration(3 * 86_400_000 + 4 * 3_600_000)).toBe("3 d 4 h");
  });
});

describe("dayStart", () => {
  it("is a date input's local midnight, or null", () => {
    expect(dayStart("2026-03-02")).toBe(new Date(2026, 2, 2).getTime());
    expect(dayStart("")).toBeNull();
    expect(dayStart("03/02/2026")).toBeNull();
  });
});
