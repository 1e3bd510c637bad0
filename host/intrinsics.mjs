// The built-ins the host's own machinery relies on, captured before any plugin code exists.
// Plugins share the host's globals (OpenCode runs them all in one process, seed 003 §8.1):
// one can wrap `JSON.stringify`, patch `Map.prototype.set` or `Function.prototype.call`. The
// host's framing, registries, gate and pending calls use only these copies, so such a patch
// reaches the plugin's own code and its neighbours' code — never Berth's.
//
// Owns: the captured copies and the safe collections built on them. Must not: import anything
// that could run plugin code, or hand its collections' contents to anyone.
//
// A few hooks the language itself calls are fixed here too (`lockLanguageHooks`, D-031): a
// `toJSON` on `Object.prototype` or `Array.prototype` would rewrite every frame the captured
// `JSON.stringify` makes, and a patched `Promise.prototype.then`/`constructor` would see every
// value the host awaits. The host's own loops over plugin objects go by index over captured
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
export const URLCtor = URL
const urlOrigin = uncurry(Object.getOwnPropertyDescriptor(URL.prototype, "origin").get)
/** The origin of a URL string, by the captured parser (throws on what is not a URL). */
export const originOf = (href) => urlOrigin(new URLCtor(href))
const defineProperty = Object.defineProperty

/**
 * Fixes the language hooks named at the top, before any plugin code exists. `toJSON` stays
 * absent from both prototypes, while `x.toJSON = f` on any other object still makes its own
 * property (the usual assignment); `then`, `constructor` and `Promise[Symbol.species]` keep
 * their built-in values. Changing one fails with a TypeError naming it.
 */
export function lockLanguageHooks() {
  for (const [proto, name] of [[Object.prototype, "Object"], [Array.prototype, "Array"]]) {
    defineProperty(proto, "toJSON", {
      configurable: false,
      enumerable: false,
      get: undefined,
      set(v) {
        if (this === proto) throw new TypeError(`${name}.prototype.toJSON is fixed in Berth's plugin host`)
        defineProperty(this, "toJSON", { value: v, writable: true, enumerable: true, configurable: true })
      },
    })
  }
  for (const key of ["then", "constructor"]) defineProperty(Promise.prototype, key, { writable: false, configurable: false })
  defineProperty(Promise, Symbol.species, { configurable: false })
}

const mapGet = uncurry(Map.prototype.get)
const mapSet = uncurry(Map.prototype.set)
const mapHas = uncurry(Map.prototype.has)
const mapDelete = uncurry(Map.prototype.delete)
const setAdd = uncurry(Set.prototype.add)
const setHas = uncurry(Set.prototype.has)
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
