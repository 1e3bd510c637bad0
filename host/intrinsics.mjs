// The built-ins the host's own machinery relies on, captured before any plugin code exists.
// Plugins share the host's globals (OpenCode runs them all in one process, seed 003 §8.1):
// one can wrap `JSON.stringify`, patch `Map.prototype.set` or `Function.prototype.call`. The
// host's framing, registries, gate and pending calls use only these copies, so such a patch
// reaches the plugin's own code and its neighbours' code — never Berth's.
//
// Owns: the captured copies and the safe collections built on them. Must not: import anything
// that could run plugin code, or hand its collections' contents to anyone.
//
// The language's own hooks are guarded too: a `toJSON` on `Object.prototype` or
// `Array.prototype` would rewrite every frame the captured `JSON.stringify` makes, so the host
// serialises with `frameJson`, which ignores those two; a patched
// `Promise.prototype.then`/`constructor` would see every value the host awaits, so those are
// fixed before plugin code runs (`lockLanguageHooks`, D-031). The host's own loops over plugin objects go by index over captured
// `Object.keys`/`entries` (no iterator a plugin can patch).
//
// This is a boundary for JavaScript, for the patches named above. Code that goes below it
// (raw writes to the host's file descriptors, native addons) or around it (an index setter on
// `Array.prototype`, a module both plugins import) can still act as its neighbours in a shared
// host: a shared host is one trust domain, and the page says which plugins share one.

const { bind, call } = Function.prototype
/** `uncurry(f)(self, ...args)` is `f.call(self, ...args)`, immune to later patches of either. */
export const uncurry = bind.bind(call)

export const stringify = JSON.stringify
export const parse = JSON.parse
export const ErrorCtor = Error
export const PromiseCtor = Promise
export const promiseThen = uncurry(Promise.prototype.then)
export const reflectApply = Reflect.apply
export const objectKeys = Object.keys
export const objectEntries = Object.entries
export const getPrototypeOf = Object.getPrototypeOf
export const isArray = Array.isArray
export const arrayPush = uncurry(Array.prototype.push)
export const arraySort = uncurry(Array.prototype.sort)
export const stringSlice = uncurry(String.prototype.slice)
export const stringIndexOf = uncurry(String.prototype.indexOf)
export const stringStartsWith = uncurry(String.prototype.startsWith)
export const stringSplit = uncurry(String.prototype.split)
export const arrayJoin = uncurry(Array.prototype.join)
export const arrayUnshift = uncurry(Array.prototype.unshift)
export const URLCtor = URL
const urlOrigin = uncurry(Object.getOwnPropertyDescriptor(URL.prototype, "origin").get)
/** The origin of a URL string, by the captured parser (throws on what is not a URL). */
export const originOf = (href) => urlOrigin(new URLCtor(href))
const defineProperty = Object.defineProperty

/**
 * Fixes the promise hooks named at the top before any plugin code exists: `then`,
 * `constructor` and `Promise[Symbol.species]` keep their built-in values, and changing one
 * fails with a TypeError.
 */
export function lockLanguageHooks() {
  for (const key of ["then", "constructor"]) defineProperty(Promise.prototype, key, { writable: false, configurable: false })
  defineProperty(Promise, Symbol.species, { configurable: false })
}

const ObjectProto = Object.prototype
const ArrayProto = Array.prototype
const hasOwn = Object.hasOwn
const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor
const isFiniteNumber = Number.isFinite
const numberValue = uncurry(Number.prototype.valueOf)
const stringValue = uncurry(String.prototype.valueOf)
const booleanValue = uncurry(Boolean.prototype.valueOf)

/**
 * `JSON.stringify(value)` for what the host frames and compares. A `toJSON` on
 * `Object.prototype` or `Array.prototype` (or a swapped `Array.prototype` chain) would reach
 * every object of every frame through the built-in; with none there — always, unless a plugin
 * put one — the built-in runs at full speed. Otherwise a serializer of the same grammar runs
 * that ignores those two, so the frames stay the host's (`toJSON` elsewhere, `Date`'s, still
 * applies). Checking costs two property lookups; fixing the prototypes instead slowed every
 * `JSON.stringify` in the host on Bun. Serialising runs the getters of the values inside, so a
 * plugin's getter can put a `toJSON` there midway: a `toJSON` still there afterwards sends
 * the value the slow way, and what the host writes into a frame (who ran, who answered, who
 * changed what) comes before any plugin value in it. One getter that puts it there and a later
 * one that takes it away again reach the plugin values between them: a shared host is one
 * trust domain.
 */
export function frameJson(value) {
  if (prototypesClean()) {
    const json = stringify(value)
    // A getter inside may have put one there midway: then the slow way, which ignores it.
    if (prototypesClean()) return json
  }
  return plainJson(value, "", new SafeSet())
}

const prototypesClean = () => !hasOwn(ObjectProto, "toJSON") && !hasOwn(ArrayProto, "toJSON") && getPrototypeOf(ArrayProto) === ObjectProto

function plainJson(value, key, seen) {
  if (value !== null && typeof value === "object") {
    const toJSON = ownToJSON(value)
    if (typeof toJSON === "function") value = reflectApply(toJSON, value, [key])
  }
  if (value === null) return "null"
  switch (typeof value) {
    case "string":
      return stringify(value)
    case "number":
      return isFiniteNumber(value) ? stringify(value) : "null"
    case "boolean":
      return value ? "true" : "false"
    case "bigint":
      throw new TypeError("Do not know how to serialize a BigInt")
    case "object":
      break
    default:
      return undefined
  }
  if (value instanceof Number) return plainJson(numberValue(value), key, seen)
  if (value instanceof String) return stringify(stringValue(value))
  if (value instanceof Boolean) return booleanValue(value) ? "true" : "false"
  if (seen.has(value)) throw new TypeError("Converting circular structure to JSON")
  seen.add(value)
  let out
  if (isArray(value)) {
    out = "["
    for (let i = 0; i < value.length; i++) {
      const item = plainJson(value[i], String(i), seen)
      out += (i ? "," : "") + (item === undefined ? "null" : item)
    }
    out += "]"
  } else {
    out = "{"
    const keys = objectKeys(value)
    let first = true
    for (let i = 0; i < keys.length; i++) {
      const item = plainJson(value[keys[i]], keys[i], seen)
      if (item === undefined) continue
      out += (first ? "" : ",") + stringify(keys[i]) + ":" + item
      first = false
    }
    out += "}"
  }
  seen.delete(value)
  return out
}

/** The `toJSON` `value` inherits from anything but the two prototypes `frameJson` ignores. */
function ownToJSON(value) {
  for (let o = value; o !== null && o !== ObjectProto && o !== ArrayProto; o = getPrototypeOf(o)) {
    const d = getOwnPropertyDescriptor(o, "toJSON")
    if (d) return d.get ? reflectApply(d.get, value, []) : d.value
  }
  return undefined
}

const mapGet = uncurry(Map.prototype.get)
const mapSet = uncurry(Map.prototype.set)
const mapHas = uncurry(Map.prototype.has)
const mapDelete = uncurry(Map.prototype.delete)
const setAdd = uncurry(Set.prototype.add)
const setHas = uncurry(Set.prototype.has)
const setDelete = uncurry(Set.prototype.delete)
const setForEach = uncurry(Set.prototype.forEach)
const weakGet = uncurry(WeakMap.prototype.get)
const weakSet = uncurry(WeakMap.prototype.set)
const weakHas = uncurry(WeakMap.prototype.has)
const MapCtor = Map
const SetCtor = Set
const WeakMapCtor = WeakMap

/** A Map whose contents no prototype patch can see or change. */
export class SafeMap {
  #m = new MapCtor()
  get(k) {
    return mapGet(this.#m, k)
  }
  set(k, v) {
    mapSet(this.#m, k, v)
    return this
  }
  has(k) {
    return mapHas(this.#m, k)
  }
  delete(k) {
    return mapDelete(this.#m, k)
  }
}

/** A Set whose contents no prototype patch can see or change. */
export class SafeSet {
  #s = new SetCtor()
  constructor(items) {
    if (items) for (let i = 0; i < items.length; i++) setAdd(this.#s, items[i])
  }
  add(v) {
    setAdd(this.#s, v)
    return this
  }
  has(v) {
    return setHas(this.#s, v)
  }
  delete(v) {
    return setDelete(this.#s, v)
  }
  values() {
    const out = []
    setForEach(this.#s, (v) => arrayPush(out, v))
    return out
  }
}

/** A WeakMap whose contents no prototype patch can see or change. */
export class SafeWeakMap {
  #m = new WeakMapCtor()
  get(k) {
    return weakGet(this.#m, k)
  }
  set(k, v) {
    weakSet(this.#m, k, v)
    return this
  }
  has(k) {
    return weakHas(this.#m, k)
  }
}

// Framing: the bytes of every frame are made and read with these.
const B = Buffer
export const bufferAlloc = B.alloc
export const bufferAllocUnsafe = B.allocUnsafe
export const bufferByteLength = B.byteLength
export const bufferConcat = B.concat
export const bufWrite = uncurry(B.prototype.write)
export const bufSubarray = uncurry(B.prototype.subarray)
export const bufToString = uncurry(B.prototype.toString)
export const bufLength = uncurry(Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), "length").get)
