const items = new Map();
module.exports.put = (k, v) => items.set(k, v);
module.exports.get = (k) => items.get(k);
module.exports.check = () => (module.exports.put('a', 1), module.exports.get('a') === 1);
